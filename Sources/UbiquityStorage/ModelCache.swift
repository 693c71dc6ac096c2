import Foundation

/// Resolved models of store files, shared by every store whose file holds the same model text.
///
/// Opening a store decoded its `model_json` and resolved it anew — JSON decoding, validation,
/// the SQL texts — which was half of an open's CPU in W6, where 10,000 accounts' stores hold one
/// model (perf, docs/benchmarks.md "Cold calls, traced"). A `ResolvedModel` is immutable (`Sendable`,
/// `let`s only), so stores with the same text can share one: identity checks on it
/// (`readShapes.model === model`, …) stay per connection, and each connection belongs to one store.
///
/// Keyed by the text itself, not by the `model_hash` stored beside it, so a file whose hash and
/// text disagree still gets its own text's model. Bounded: past `capacity` texts it is emptied
/// and refills (a server holds a few model versions, not thousands).
enum ModelCache {
    static let capacity = 64
    private static let models = Locked<[String: ResolvedModel]>([:])

    /// The model `json` describes, resolved once per text.
    static func resolved(json: String) throws -> ResolvedModel {
        if let m = models.withLock({ $0[json] }) { return m }
        let m = try ResolvedModel(ModelDefinition.fromJSON(Data(json.utf8)))
        models.withLock { cache in
            if cache.count >= capacity { cache.removeAll() }
            cache[json] = m
        }
        return m
    }

    /// Texts held now (tests).
    static var count: Int { models.withLock { $0.count } }
}
