/// One context's life across store transitions (SPEC §4.4, docs/lifecycle.md) as a value type
/// (STYLE.md: `mutating func event(...) -> Action`), unit-tested without a server
/// (`ContextLifecycleTests`). `ContextRegistry` keeps one per context and does what it answers.
///
///     open ──transition begins──▶ saving(window) ◀──a call leaves changes──┐
///                                     │  ▲                                 │
///                 a call leaves none  ▼  │ a call makes changes again      │
///                               ready(window) ─────────────────────────────┘
///     saving / ready ──transition ends, or a call after the deadline──▶ reset(cause)
///     any state ──store destroyed or replaced──▶ reset(cause)
///
/// While a window is open every call works as before — the client saves, repeatedly while it
/// still has changes (a save refused by a conflict can be fixed and retried). `ready` only tells
/// the transition it need not wait for this context any more. Once reset, every call fails with
/// FAILED_PRECONDITION STORE_CHANGED until the client creates a new context.
struct ContextLifecycle: Equatable {
    /// A transition's chance to save, as one context sees it.
    struct Window: Equatable {
        /// The transition (`StoreTransitions` numbers them).
        let transition: UInt64
        /// Seconds on the registry's clock after which calls are refused and the context reset.
        let deadline: Double
    }

    /// Why a context was reset; the STORE_CHANGED message says it.
    enum Cause: Equatable {
        /// DestroyStore or ReplaceStore: no chance to save (the store's contents are gone).
        case storeDestroyedOrReplaced
        /// A store transition (its kind, for the message: "the device signed out").
        case transition(String)
    }

    enum State: Equatable {
        case open
        /// A transition began and the context had (or has again) unsaved changes.
        case saving(Window, Cause)
        /// In a transition's window with nothing left to save.
        case ready(Window, Cause)
        case reset(Cause)
    }

    private(set) var state: State = .open

    /// What the registry does for an event.
    enum Action: Equatable {
        /// Nothing beyond what the caller was doing.
        case none
        /// Run the call.
        case proceed
        /// Drop the context's pending changes and pin (it holds the context's lock), then, for a
        /// call, refuse it with STORE_CHANGED.
        case reset(Cause)
        /// Refuse the call with STORE_CHANGED (already reset).
        case refuse(Cause)
        /// The context has nothing left to save: tell the transition waiting for it.
        case settled(transition: UInt64)
    }

    /// A transition begins for this context's store or session; `hasChanges` as read under the
    /// context's lock. `.settled` when the transition need not wait for it: it has nothing to
    /// save, or it is already reset (it stays so) or in another transition's window (which
    /// `TransitionBook` prevents for overlapping scopes; that one resets it).
    mutating func transitionBegan(_ w: Window, cause: Cause, hasChanges: Bool) -> Action {
        switch state {
        case .open:
            state = hasChanges ? .saving(w, cause) : .ready(w, cause)
            return hasChanges ? .none : .settled(transition: w.transition)
        case .saving, .ready, .reset:
            return .settled(transition: w.transition)
        }
    }

    /// A call on the context begins at `now` (holding its lock).
    mutating func call(now: Double) -> Action {
        switch state {
        case .open: return .proceed
        case .saving(let w, let cause), .ready(let w, let cause):
            if now >= w.deadline {
                state = .reset(cause)
                return .reset(cause)
            }
            return .proceed
        case .reset(let cause): return .refuse(cause)
        }
    }

    /// A call that ran ended and left the context with or without unsaved changes.
    mutating func callEnded(hasChanges: Bool) -> Action {
        switch state {
        case .saving(let w, let cause) where !hasChanges:
            state = .ready(w, cause)
            return .settled(transition: w.transition)
        case .ready(let w, let cause) where hasChanges:
            state = .saving(w, cause)
            return .none
        default: return .none
        }
    }

    /// The transition `id` ran out of time or every context settled: the context is reset.
    mutating func transitionEnded(_ id: UInt64) -> Action {
        switch state {
        case .saving(let w, let cause) where w.transition == id, .ready(let w, let cause) where w.transition == id:
            state = .reset(cause)
            return .reset(cause)
        default: return .none
        }
    }

    /// The store is destroyed or replaced: the context stops at once, with no chance to save.
    mutating func storeDestroyedOrReplaced() {
        if case .reset = state { return }
        state = .reset(.storeDestroyedOrReplaced)
    }

    /// Whether the context was reset (it answers STORE_CHANGED).
    var isReset: Bool { if case .reset = state { true } else { false } }
}
