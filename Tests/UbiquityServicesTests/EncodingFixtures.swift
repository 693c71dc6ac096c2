import UbiquityStorage

/// The model the hand-written encoders' tests share (`ObjectEncodingTests`, `FetchEncodingTests`,
/// `FetchStreamingTests`): an entity with one attribute of every type and a sub-entity.
enum EncodingFixtures {
    /// One attribute of every type.
    static let allTypes: [AttributeDefinition] = [
        AttributeDefinition(name: "s", type: .string), AttributeDefinition(name: "b", type: .bool),
        AttributeDefinition(name: "i16", type: .int16), AttributeDefinition(name: "i32", type: .int32),
        AttributeDefinition(name: "i64", type: .int64), AttributeDefinition(name: "f", type: .float),
        AttributeDefinition(name: "d", type: .double), AttributeDefinition(name: "dec", type: .decimal),
        AttributeDefinition(name: "date", type: .date), AttributeDefinition(name: "bin", type: .binary),
        AttributeDefinition(name: "u", type: .uuid), AttributeDefinition(name: "uri", type: .uri),
    ]

    /// `Thing` (`allTypes` and `relationships`) and `SubThing` (inherits it, adds `extra`).
    static func model(_ version: String, relationships: [RelationshipDefinition], extra: AttributeType) -> ModelDefinition {
        ModelDefinition(versionIdentifier: version, entities: [
            EntityDefinition(name: "Thing", attributes: allTypes, relationships: relationships),
            EntityDefinition(name: "SubThing", parent: "Thing", attributes: [AttributeDefinition(name: "extra", type: extra)]),
        ])
    }
}
