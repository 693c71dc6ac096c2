/// `ListAccounts`' page token: `p1.` + the last account ID of the previous page. IDs are unique
/// and the list is in ID order, so the next page starts after that ID whatever was made or
/// deleted meanwhile. Documented as opaque; the prefix lets a later format be told apart.
enum AccountPageToken {
    private static let prefix = "p1."

    static func make(after id: String) -> String { prefix + id }

    /// The ID to list after; nil for the first page (an empty token).
    static func after(_ token: String) throws -> String? {
        guard !token.isEmpty else { return nil }
        let id = token.utf8.dropFirst(prefix.utf8.count)
        // account IDs are server-made: letters, digits, '-' and '_'
        guard token.hasPrefix(prefix), (1...200).contains(id.count),
              id.allSatisfy({ $0 == 0x2d || $0 == 0x5f || (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) })
        else {
            throw ServiceError.invalid("page_token", "not a ListAccounts page token: pass back next_page_token unchanged", reason: .badToken)
        }
        return String(token.dropFirst(prefix.count))
    }
}
