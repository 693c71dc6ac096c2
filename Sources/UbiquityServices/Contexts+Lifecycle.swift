import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

// Contexts: creating, saving, resetting and closing contexts, and their query generation.
extension ContextsService {
    func createContext(_ req: Ubiquity_V1_CreateContextRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextState {
        let account = context.account
        let policy = try Convert.mergePolicy(req.mergePolicy)
        let mode: GenerationModeKind
        switch req.generationMode {
        case .unspecified, .pinnedAtFirstRead: mode = .pinnedAtFirstRead
        case .unpinned: mode = .unpinned
        case .pinnedAtToken: mode = .pinnedAtToken
        case .UNRECOGNIZED(let n): throw ServiceError.invalid("generation_mode", "unknown generation mode \(n)", reason: .badEnum)
        }
        var parentBox: ContextBox?
        if !req.parentContextID.isEmpty {
            let pb = try registry.find(req.parentContextID, account: account)
            guard pb.storeID.uuidString.lowercased() == req.storeID.lowercased() || req.storeID.isEmpty else {
                throw ServiceError.invalid("parent_context_id", "the parent context works on another store", reason: .badContextID)
            }
            parentBox = pb
        }
        let parent = parentBox
        let storeID = parent.map { $0.storeID.uuidString } ?? req.storeID
        return try await backend.withStore(storeID, account: account) { store in
            _ = try backend.model(of: store)
            let box = ContextBox(id: UUID(), account: account, storeID: store.id, name: req.name, author: req.author,
                                 parent: parent, autoMerge: req.automaticallyMergesChanges, mergePolicy: policy, mode: mode)
            if mode == .pinnedAtToken {
                guard !req.token.isEmpty else {
                    throw ServiceError.invalid("token", "GENERATION_MODE_PINNED_AT_TOKEN needs a token", reason: .missingField)
                }
                let t = try Convert.token(req.token, field: "token")  // another store's token: the pin says which (Backend.tokenError)
                box.pin = try store.pin(t, lease: lease)
            }
            do { try registry.add(box) } catch { if let pin = box.pin { store.unpin(pin) }; throw error }
            return Self.state(box)
        }
    }

    func save(_ req: Ubiquity_V1_ContextSaveRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextSaveResponse {
        try await inContext(req.contextID, context, ancestors: true) { box, store in
            var res = Ubiquity_V1_ContextSaveResponse()
            if let parent = box.parent {
                // a child's save moves its changes into the parent; the parent's save commits them
                if !req.dryRun {
                    try Self.checkRoom(parent, adding: box.pending.count, limit: backend.limits.maxPendingChangesPerContext)
                    parent.pending.merge(box.pending)
                    box.pending = Pending()
                }
                res.savedToParent = true
                res.state = Self.state(box)
                return res
            }
            let model = backend.modelIfAny(of: store)
            var s = try Self.saveRequest(box.pending)
            s.mergePolicy = box.mergePolicy
            s.author = box.author.nonEmpty
            s.contextName = box.name.nonEmpty
            s.clientTransactionID = req.clientTransactionID.nonEmpty
            s.dryRun = req.dryRun
            s.modelVersionHash = try backend.checkModelVersion(context, store: store)
            let outcome = try await registry.save(s, on: store, model: model, conflictsInResponse: req.conflictsInResponse,
                                                  issueFields: { _ in nil })
            guard case .saved(let r) = outcome else {
                // refused by the merge policy: nothing applied, the pending changes stay
                res.result = Convert.saveResult(outcome, model: model)
                res.state = Self.state(box)
                return res
            }
            if !r.dryRun {
                box.pending = Pending()
                // saving moves the pin to the new generation (§4.2)
                if box.mode != .unpinned { try Self.movePin(box, store, to: r.token, lease: lease) }
            }
            res.result = Convert.saveResult(r, model: model)
            res.state = Self.state(box)
            return res
        }
    }

    func rollback(_ req: Ubiquity_V1_ContextRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextState {
        try await inContext(req.contextID, context) { box, _ in
            box.pending = Pending()
            return Self.state(box)
        }
    }

    func reset(_ req: Ubiquity_V1_ContextRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextState {
        try await inContext(req.contextID, context) { box, store in
            box.pending = Pending()
            try Self.movePin(box, store, to: nil, lease: lease)
            if box.mode == .pinnedAtToken { box.mode = .pinnedAtFirstRead }
            return Self.state(box)
        }
    }

    func refresh(_ req: Ubiquity_V1_RefreshRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextState {
        try await inContext(req.contextID, context) { box, store in
            let now = store.currentToken
            if box.mode != .unpinned { try Self.movePin(box, store, to: now, lease: lease) }
            if !req.mergeChanges {
                box.pending = Pending()
                return Self.state(box)
            }
            // keep the changes, re-based on the store's current values: they win on save
            let ids = box.pending.storedIDs
            let current = ids.isEmpty ? [] : try await store.objects(ids, at: .token(now))
            for (id, o) in zip(ids, current) {
                if let o {
                    if var u = box.pending.updated[id] { u.baseVersion = o.version; u.baseValues = o.values; box.pending.updated[id] = u }
                    if box.pending.deleted[id] != nil { box.pending.deleted[id] = o.version }
                } else {
                    box.pending.updated[id] = nil       // gone from the store: nothing left to change
                    box.pending.deleted[id] = nil
                }
            }
            return Self.state(box)
        }
    }

    func setQueryGeneration(_ req: Ubiquity_V1_SetQueryGenerationRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextState {
        try await inContext(req.contextID, context) { box, store in
            switch req.generationMode {
            case .unpinned:
                try Self.movePin(box, store, to: nil, lease: lease)
                box.mode = .unpinned
            case .unspecified, .pinnedAtFirstRead:
                try Self.movePin(box, store, to: nil, lease: lease)
                box.mode = .pinnedAtFirstRead
            case .pinnedAtToken:
                guard !req.token.isEmpty else { throw ServiceError.invalid("token", "GENERATION_MODE_PINNED_AT_TOKEN needs a token", reason: .missingField) }
                let t = try Convert.token(req.token, field: "token")  // another store's token: the pin says which (Backend.tokenError)
                try Self.movePin(box, store, to: t, lease: lease)
                box.mode = .pinnedAtToken
            case .UNRECOGNIZED(let n):
                throw ServiceError.invalid("generation_mode", "unknown generation mode \(n)", reason: .badEnum)
            }
            return Self.state(box)
        }
    }

    func getState(_ req: Ubiquity_V1_ContextRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextState {
        try await inContext(req.contextID, context) { box, _ in Self.state(box) }
    }

    func closeContext(_ req: Ubiquity_V1_ContextRequest, context: ServerContext) async throws -> Ubiquity_V1_CloseContextResponse {
        try await inContext(req.contextID, context) { box, store in
            for gone in registry.remove(box) {
                gone.closed = gone === box ? true : gone.closed
                if let pin = gone.pin { store.unpin(pin) }
            }
            box.pin = nil
            box.pending = Pending()
            return Ubiquity_V1_CloseContextResponse()
        }
    }
}
