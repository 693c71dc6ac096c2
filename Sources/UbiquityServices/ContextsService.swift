import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

/// `ubiquity.v1.Contexts`: server-side contexts with pending changes, a query generation, a merge
/// policy and optional parents (SPEC §4.4). Each RPC is a method (Contexts+Lifecycle.swift,
/// Contexts+Changes.swift); this is their table.
public struct ContextsService: Sendable {
    let backend: Backend
    let registry: ContextRegistry
    public init(backend: Backend, registry: ContextRegistry) { self.backend = backend; self.registry = registry }

    /// A context's pins are leases of its idle timeout: a forgotten context releases its generation.
    var lease: Double { backend.limits.contextIdleSeconds }

    public func register(into router: inout Router) {
        router.register(service: "ubiquity.v1.Contexts", backend: backend) { t in
            t.unary("CreateContext", createContext)
            t.unary("Fetch", queryFields: "fetch.", fetch)
            t.unary("Insert", insert)
            t.unary("Update", update)
            t.unary("Delete", delete)
            t.unary("Save", save)
            t.unary("Rollback", rollback)
            t.unary("Reset", reset)
            t.unary("Refresh", refresh)
            t.unary("SetQueryGeneration", setQueryGeneration)
            t.unary("GetState", getState)
            t.unary("CloseContext", closeContext)
        }
    }

    /// Looks up the context, locks it (with its ancestors if asked), opens its store, applies a
    /// pending automatic merge, and runs `body`: what every method on an existing context does first.
    func inContext<T: Sendable>(_ id: String, _ context: ServerContext, ancestors: Bool = false,
                                _ body: @escaping @Sendable (ContextBox, Store) async throws -> T) async throws -> T {
        let box = try registry.find(id, account: context.account)
        let lease = self.lease
        return try await registry.with(box, ancestors: ancestors) {
            try await backend.withStore(box.storeID.uuidString, account: context.account) { store in
                try Self.applyAutomaticMerge(box, store, lease: lease)
                return try await body(box, store)
            }
        }
    }

    /// Drops contexts idle past the limit, every `interval` seconds, until the task is cancelled.
    /// Their pins are leases of the same length, so the store forgets them on its own.
    public func startExpiry(interval: Double) -> Task<Void, Never> {
        let reg = registry
        return Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(max(0.05, interval) * 1e9))
                for gone in reg.expire() { gone.closed = true }
            }
        }
    }
}
