import ArgumentParser
import Dispatch
import Foundation
import SwiftProtobuf
import UbiquityGRPC
import UbiquityLock
import UbiquityProtos

/// Filters shared by `watch` and `history` (ChangeFilter in changes.proto).
struct ChangeFilterOptions: ParsableArguments {
    @Option(help: "The store's name.") var store: String
    @Option(help: "Start after this token (hex, from `ubiq generation`, a save, or a printed resume token), or `now` / `oldest`.")
    var from: String?
    @Option(help: "Only changes to this entity (and its sub-entities); repeatable.") var entity: [String] = []
    @Option(help: "Skip transactions by this author (a device ID); repeatable.") var excludeAuthor: [String] = []
    @Flag(help: "Print each insert's and update's values after the transaction, as JSON.") var values = false

    var filter: Ubiquity_V1_ChangeFilter {
        var f = Ubiquity_V1_ChangeFilter()
        f.entities = entity
        f.excludeAuthors = excludeAuthor
        f.includeValues = values
        return f
    }

    func startPoint(default fallback: String) throws -> Ubiquity_V1_StartPoint {
        var p = Ubiquity_V1_StartPoint()
        switch from ?? fallback {
        case "now": p.now = true
        case "oldest": p.oldest = true
        case let hex: p.token = try Hex.decode(hex)
        }
        return p
    }
}

/// One line per change, for people: generation, commit time, author, kind, entity, object ID,
/// changed properties (and, with --values, the values as JSON).
enum ChangeLines {
    static func lines(_ t: Ubiquity_V1_Transaction, values: Bool) -> [String] {
        let time = t.hasCommitTime ? timeFormatter.string(from: t.commitTime.date) : "-"
        let author = t.author.isEmpty ? "-" : t.author
        let part = t.hasPart ? "  (part \(t.part.index + 1) of \(t.part.count))" : ""
        if t.changes.isEmpty { return ["\(t.generation)  \(time)  \(author)  (no matching changes)\(part)"] }
        return t.changes.map { c in
            var line = "\(t.generation)  \(time)  \(author)  \(kind(c.kind))  \(c.entity)  \(c.objectID)  \(c.changedProperties.joined(separator: ","))"
            if values && (!c.values.isEmpty || !c.relationships.isEmpty) {
                var obj: [String: Any] = c.values.mapValues(JSONValues.plain)
                for (k, v) in c.relationships { obj[k] = v.objectIds }
                if let d = try? JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys, .withoutEscapingSlashes]) {
                    line += "  " + String(decoding: d, as: UTF8.self)
                }
            }
            if values && c.valuesUnavailable { line += "  (values no longer available)" }
            if !c.tombstone.isEmpty { line += "  tombstone " + c.tombstone.sorted { $0.key < $1.key }.map { "\($0.key)=\(JSONValues.display($0.value))" }.joined(separator: " ") }
            return line + part
        }
    }

    static func kind(_ k: Ubiquity_V1_Change.Kind) -> String {
        switch k {
        case .insert: "insert"
        case .update: "update"
        case .delete: "delete"
        default: "?"
        }
    }

    nonisolated(unsafe) static let timeFormatter: ISO8601DateFormatter = {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f
    }()
}

/// Unbuffered output: a watcher's lines must reach a pipe as they happen, not when a buffer fills.
enum Out {
    static func line(_ s: String) { FileHandle.standardOutput.write(Data((s + "\n").utf8)) }
    static func note(_ s: String) { FileHandle.standardError.write(Data((s + "\n").utf8)) }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Follow a store's changes live (Changes.Subscribe): one line per change.",
        discussion: """
            Each line: generation, commit time, author, kind, entity, object ID, changed properties. Markers go to \
            stderr, starting with '#': when the backlog from --from has been sent ('# caught up'), progress of a \
            filtered watch, and on exit or Ctrl-C the resume token with the command that continues exactly after \
            the last change printed.
            Example: ubiq watch --store notes --from oldest --exclude-author my-device
            """)
    @OptionGroup var server: ServerOptions
    @OptionGroup var options: ChangeFilterOptions
    @Option(help: "Coalescing window in milliseconds (bigger batches, at most this much later).") var coalesceMs: UInt32 = 0
    @Option(help: "Exit after this many transactions.") var count: Int?

    func run() async throws {
        let s = try await server.connect()
        let info = try await s.store(options.store)
        var req = Ubiquity_V1_SubscribeRequest()
        req.storeID = info.storeID
        req.from = try options.startPoint(default: "now")
        req.filter = options.filter
        req.coalesceWindowMs = coalesceMs

        let resume = ResumePoint(req.from.token.isEmpty ? nil : req.from.token)
        let store = options.store
        @Sendable func resumeNote() -> String? {
            resume.token.withLock { $0 }.map { "# resume: ubiq watch --store \(store) --from \(Hex.encode($0))" }
        }
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let sources = [SIGINT, SIGTERM].map { (sig: Int32) in
            let src = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            src.setEventHandler {
                if let note = resumeNote() { Out.note(note) }
                Foundation.exit(sig == SIGINT ? 130 : 143)
            }
            src.resume()
            return src
        }
        defer { for src in sources { src.cancel() } }

        var seen = 0
        do {
            for try await r in s.stream("Changes/Subscribe", req, Ubiquity_V1_SubscribeResponse.self, timeout: nil) {
                switch r.event {
                case .transactions(let batch):
                    // Lines and token move together under the lock the Ctrl-C handler takes: it
                    // never prints a token from before lines already printed (a resume would
                    // repeat them) nor one past lines not yet printed (a gap).
                    resume.token.withLock { token in
                        for t in batch.transactions {
                            for line in ChangeLines.lines(t, values: options.values) { Out.line(line) }
                        }
                        if !r.resumeToken.isEmpty { token = r.resumeToken }
                    }
                    seen += batch.transactions.count
                case .caughtUp:
                    Out.note("# caught up at generation \(r.resumeGeneration)")
                case .progress:
                    Out.note("# progress: generation \(r.resumeGeneration)")
                case .cursorAtRisk(let risk):
                    Out.note("# cursor at risk: history before \(Hex.encode(risk.oldestRetainedToken)) is about to be trimmed")
                case .storeEvent(let e):
                    Out.note("# store event: \(e.phase) \(e.transition)")
                case .keyValueChange(let kv):
                    Out.note("# key-value change: \(kv.key)\(kv.deleted ? " deleted" : "")")
                case .liveQuery, .none:
                    break
                }
                if !r.resumeToken.isEmpty { resume.token.withLock { $0 = r.resumeToken } }
                if let count, seen >= count { break }
            }
        } catch let e as RPCError {
            if let note = resumeNote() { Out.note(note) }
            throw CLIError(Session.describe(e))
        }
        if let note = resumeNote() { Out.note(note) }
    }
}

/// The last resume token a watch received, read by the Ctrl-C handler on another queue.
final class ResumePoint: Sendable {
    let token: Lock<Data?>
    init(_ token: Data?) { self.token = Lock(token) }
}

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a store's history (Changes.FetchHistory), page by page: one line per change.",
        discussion: """
            Lines as `ubiq watch` prints them. At the end, on stderr, the token to continue from ('# next: …') \
            when more history follows --limit.
            Example: ubiq history --store notes --limit 20
            """)
    @OptionGroup var server: ServerOptions
    @OptionGroup var options: ChangeFilterOptions
    @Option(help: "At most this many transactions in all (default: every one).") var limit: Int?
    @Option(help: "Transactions per FetchHistory call (1-1,000).") var pageSize: UInt32 = 100

    func validate() throws {
        guard (1...1000).contains(pageSize) else { throw ValidationError("--page-size must be 1-1000") }
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func run() async throws {
        let s = try await server.connect()
        let info = try await s.store(options.store)
        var req = Ubiquity_V1_FetchHistoryRequest()
        req.storeID = info.storeID
        req.from = try options.startPoint(default: "oldest")
        req.filter = options.filter
        var printed = 0
        var pages = 0
        while true {
            // The last page asks for exactly what is left, so its next token follows the last line printed.
            req.pageSize = limit.map { UInt32(min(Int(pageSize), $0 - printed)) } ?? pageSize
            let page = try await s.unary("Changes/FetchHistory", req, Ubiquity_V1_FetchHistoryResponse.self)
            pages += 1
            for t in page.transactions {
                for line in ChangeLines.lines(t, values: options.values) { Out.line(line) }
            }
            printed += page.transactions.count
            guard page.hasMore_p else {
                Out.note("# end of history: \(printed) transaction\(printed == 1 ? "" : "s") in \(pages) page\(pages == 1 ? "" : "s"); watch from here: ubiq watch --store \(options.store) --from \(Hex.encode(page.nextToken))")
                return
            }
            req.from.token = page.nextToken
            if let limit, printed >= limit {
                Out.note("# next: ubiq history --store \(options.store) --from \(Hex.encode(page.nextToken))")
                return
            }
        }
    }
}
