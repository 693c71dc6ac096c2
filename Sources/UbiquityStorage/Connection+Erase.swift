/// Deleting an account's rows so nothing of them stays on disk (DeleteAccount, docs/accounts.md):
/// SQLite otherwise leaves deleted cells in free pages and old page images in the WAL.
extension Connection {
    /// Runs `body` with `secure_delete` on (deleted content is overwritten with zeros), then
    /// checkpoints and truncates the WAL (its frames held the rows' earlier page images).
    func erasing<T>(_ body: () throws -> T) throws -> T {
        let before = try scalar("PRAGMA secure_delete")
        try exec("PRAGMA secure_delete=ON")
        defer {
            if case .integer(let v) = before, v != 1 { try? exec("PRAGMA secure_delete=\(v == 2 ? "FAST" : "OFF")") }
        }
        let result = try body()
        _ = checkpoint(.truncate)
        return result
    }
}
