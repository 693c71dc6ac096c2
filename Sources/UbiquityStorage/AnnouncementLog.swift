import Foundation

/// What a store's history says about the transitions announced on it (docs/lifecycle.md "Every
/// WILL_CHANGE is closed"): the WILL_CHANGE events no DID_CHANGE closed yet, and the last event.
///
/// The rule it keeps: every WILL_CHANGE written is followed, on the same store, by a DID_CHANGE
/// of the same transition — plain if it happened, `cancelled` if it did not. Whoever finishes or
/// abandons a transition asks the log what is still missing (`closing`), so the answer is the same
/// whether the transition ends in the process that began it or in a later one after a kill.
///
/// Kept in the store's `ubq_meta` (key `announcements`) and rewritten by `Store.appendEvent` in
/// the transaction that appends each event, so it never disagrees with the history.
public struct AnnouncementLog: Codable, Sendable, Equatable {
    /// WILL_CHANGE events not closed yet, oldest first.
    public private(set) var open: [StoreEventRecord] = []
    /// The last event appended.
    public private(set) var last: StoreEventRecord?

    public init() {}

    /// Records an appended event: a WILL_CHANGE opens, a DID_CHANGE closes the WILL_CHANGE of its
    /// transition (by `transitionID`; without one, the oldest open one of the same transition and
    /// device). A DID_CHANGE that closes nothing is allowed: an import announces DID_CHANGE on
    /// stores other than its WILL_CHANGE's.
    public mutating func append(_ e: StoreEventRecord) {
        last = e
        switch e.phase {
        case .willChange:
            open.append(e)
        case .didChange:
            let i = e.transitionID.map { id in open.firstIndex { $0.transitionID == id } }
                ?? open.firstIndex { $0.transition == e.transition && $0.device == e.device }
            if let i { open.remove(at: i) }
        }
    }

    /// The events to append, in order, so this store says that `transition` happened for every
    /// device, closing whatever else is open as cancelled first:
    /// - an open WILL_CHANGE of `transition` (every device) is completed;
    /// - if the last event already is `transition`'s plain DID_CHANGE, nothing more is needed
    ///   (an ending that ran before, in this process or one that was killed);
    /// - otherwise a new WILL_CHANGE and DID_CHANGE (`transitionID`) say it together — a store
    ///   that never heard the WILL_CHANGE (created in the chance to save, or restored: nobody can
    ///   follow an archived account's stores to hear it before) still hears the whole transition.
    public func closing(_ transition: StoreEventRecord.Transition, transitionID: String,
                        usingLocalStorage: (before: Bool, after: Bool) = (false, false)) -> [StoreEventRecord] {
        let ours = open.first { $0.transition == transition && $0.device == nil }
        var out = open.filter { $0 != ours }.map { $0.cancelling() }
        let saidAlready = last.map { $0.phase == .didChange && $0.transition == transition && $0.device == nil && $0.cancelled != true } ?? false
        if let ours {
            out.append(ours.completing(usingLocalStorage: usingLocalStorage.after))
        } else if !saidAlready {
            let will = StoreEventRecord(phase: .willChange, transition: transition, usingLocalStorage: usingLocalStorage.before,
                                        transitionID: transitionID)
            out += [will, will.completing(usingLocalStorage: usingLocalStorage.after)]
        }
        return out
    }

    /// The DID_CHANGE events that close the open WILL_CHANGE events of transition `id` as not
    /// having happened.
    public func cancelling(_ id: String) -> [StoreEventRecord] {
        open.filter { $0.transitionID == id }.map { $0.cancelling() }
    }

    static let key = "announcements"

    static func read(_ c: Connection) throws -> AnnouncementLog {
        guard case .text(let json) = try Meta.get(c, key) else { return AnnouncementLog() }
        return try JSONDecoder().decode(AnnouncementLog.self, from: Data(json.utf8))
    }

    func write(_ c: Connection) throws {
        try Meta.set(c, Self.key, .text(String(decoding: try JSONEncoder().encode(self), as: UTF8.self)))
    }
}

extension Store {
    /// The store's `AnnouncementLog`, read on its writer (so after every event appended before).
    public func announcementLog() async throws -> AnnouncementLog {
        try await onWriter { conn, _ in try AnnouncementLog.read(conn) }
    }
}
