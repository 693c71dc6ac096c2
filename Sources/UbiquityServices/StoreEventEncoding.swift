import UbiquityProtos
import UbiquityStorage

extension Convert {
    /// A store event as the feed sends it (`ubiquity.v1.StoreEvent`).
    static func storeEvent(_ e: StoreEventRecord) -> Ubiquity_V1_StoreEvent {
        var m = Ubiquity_V1_StoreEvent()
        m.phase = e.phase == .willChange ? .willChange : .didChange
        switch e.transition {
        case .accountAdded: m.transition = .accountAdded
        case .accountRemoved: m.transition = .accountRemoved
        case .contentRemoved: m.transition = .contentRemoved
        case .initialImportCompleted: m.transition = .initialImportCompleted
        }
        m.usingLocalStorage = e.usingLocalStorage
        m.cancelled = e.cancelled ?? false
        if let c = e.importCounts {
            m.importCounts.inserted = c.inserted
            m.importCounts.merged = c.merged
            m.importCounts.deduplicated = c.deduplicated
            m.importCounts.keyValuesMoved = c.keyValuesMoved ?? 0
            m.importCounts.keyValuesKept = c.keyValuesKept ?? 0
        }
        return m
    }
}
