import TestUpstream

#if canImport(Glibc)
import Glibc
#endif

// A graphql-transport-ws server for demos: `subscription { tick }` ticks every second.
// Usage: gqlmux-test-upstream [PORT] [TICK_MS] [TOKEN]
// With TOKEN, connection_init must carry {"token": TOKEN} or the connection is closed 4403.
// Each connection_init's payload is printed (`connection_init N: PAYLOAD`, N counting them) so a
// test can see which credentials reached it; the server is a test peer, never a real one.
let arguments = CommandLine.arguments
let port = arguments.count > 1 ? Int(arguments[1]) ?? 0 : 0
let tickMilliseconds = arguments.count > 2 ? Int(arguments[2]) ?? 1000 : 1000
var options = TestUpstreamServer.Options()
options.tickInterval = .milliseconds(tickMilliseconds)
if arguments.count > 3 { options.requiredToken = arguments[3] }
let server = TestUpstreamServer(options: options)
try await server.start(port: port)
print("test upstream listening on \(server.url)")
fflush(nil)
var told = 0
while true {
    try await Task.sleep(for: .milliseconds(50))
    let stats = await server.currentStats
    if stats.connectionInits != told {
        told = stats.connectionInits
        print("connection_init \(told): \(stats.lastInitPayload)")
        fflush(nil)
    }
}
