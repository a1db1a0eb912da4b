/// Runs `body` with `resource` and always runs `tearDown` after it, also when `body` throws, so
/// a failing test never leaks event loops, sockets or processes. Test rigs' `with` use it.
package func scoped<Resource>(
    _ resource: Resource,
    tearDown: (Resource) async -> Void,
    _ body: (Resource) async throws -> Void
) async throws {
    do {
        try await body(resource)
    } catch {
        await tearDown(resource)
        throw error
    }
    await tearDown(resource)
}
