extension String {
    /// Proto3 has no absent string: an empty one is "not given" (author, context name, predicate).
    var nonEmpty: String? { isEmpty ? nil : self }
}
