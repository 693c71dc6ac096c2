import Foundation

// Store transitions whose announcement is under way (docs/lifecycle.md "Every WILL_CHANGE is
// closed"): one row per transition, written before its first WILL_CHANGE and removed once every
// store it announced on has its closing DID_CHANGE. A row a killed process left names the only
// stores a start has to open to close WILL_CHANGE events as cancelled — not every store of the
// data directory. The stores' own `AnnouncementLog` says what is actually open; the row only
// says where to look. It holds store IDs only (no account ID: DeleteAccount leaves none behind).
extension Catalog {
    /// Records that transition `id` is about to announce on `stores`.
    public func beginAnnouncement(_ id: String, stores: [UUID]) throws {
        let list = stores.map { $0.uuidString.lowercased() }.joined(separator: ",")
        try withSQL { c in
            try c.run("INSERT OR REPLACE INTO ubq_announcements(id, stores) VALUES (?, ?)", [.text(id), .text(list)])
        }
    }

    /// Transition `id` closed every WILL_CHANGE it wrote.
    public func endAnnouncement(_ id: String) throws {
        try withSQL { c in try c.run("DELETE FROM ubq_announcements WHERE id = ?", [.text(id)]) }
    }

    /// The announcements a previous process left under way, with their stores.
    public func pendingAnnouncements() throws -> [(id: String, stores: [UUID])] {
        try withSQL { c in
            var out: [(String, [UUID])] = []
            try c.query("SELECT id, stores FROM ubq_announcements ORDER BY id") { st in
                out.append((st.text(0), st.text(1).split(separator: ",").compactMap { UUID(uuidString: String($0)) }))
            }
            return out
        }
    }
}
