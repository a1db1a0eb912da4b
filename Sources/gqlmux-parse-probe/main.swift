import Foundation
import GraphQL
import NIOCore
import RequestValidation

// Measures the GraphQL parser's cost, to choose `[limits] max_document_depth` and
// `max_document_tokens` on evidence (scripts/parse-probe.sh runs it; not a test).
//   gqlmux-parse-probe depth N STACK_KIB   parse a document nesting N selections on a thread
//                                          with a STACK_KIB stack; exits 0 if it survived
//   gqlmux-parse-probe time TOKENS         parse + print time of the worst documents of about
//                                          TOKENS tokens (deep and wide), bounds checked first
//   gqlmux-parse-probe phases N            parse and print timed apart (wide and nested)
let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: gqlmux-parse-probe depth N STACK_KIB | time TOKENS\n".utf8))
    exit(64)
}

func payload(_ query: String) -> ByteBuffer {
    var b = ByteBuffer()
    b.writeString(#"{"query":"#)
    b.writeJSONStringForProbe(query)
    b.writeString("}")
    return b
}

extension ByteBuffer {
    mutating func writeJSONStringForProbe(_ s: String) {
        writeString("\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"")
    }
}

func nested(_ depth: Int) -> String {
    "query " + String(repeating: "{ a ", count: depth) + String(repeating: "} ", count: depth)
}

let unbounded = SubscribeRequest.Limits(maxTokens: .max, maxDepth: .max)

switch arguments[1] {
case "depth":
    guard arguments.count == 4, let depth = Int(arguments[2]), let stackKiB = Int(arguments[3]) else { exit(64) }
    let document = payload(nested(depth))
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        do {
            _ = try SubscribeRequest.parse(document, limits: unbounded)
        } catch {
            print("refused: \(error)")
        }
        done.signal()
    }
    thread.stackSize = stackKiB * 1024
    thread.start()
    done.wait()
    print("survived depth \(depth) on a \(stackKiB) KiB stack")
case "time":
    guard let tokens = Int(arguments[2]) else { exit(64) }
    let limits = SubscribeRequest.Limits(maxTokens: tokens, maxDepth: SubscribeRequest.Limits.maxAllowedDepth)
    // Wide: `{ a0 a1 a2 ... }` (one token per field); deep: nested as far as allowed, then wide;
    // args: fields with arguments and variables (more parser work per token).
    let fields = tokens - 3
    let wide = "query { " + (0..<fields).map { "a\($0)" }.joined(separator: " ") + " }"
    let depth = limits.maxDepth - 1
    let deepFields = max(0, tokens - 4 * depth - 3)
    let deep =
        "query " + String(repeating: "{ a ", count: depth) + "{ " + (0..<deepFields).map { "b\($0)" }.joined(separator: " ")
        + " }" + String(repeating: " }", count: depth)
    let argFields = max(1, (tokens - 3) / 10)
    let args = "query { " + (0..<argFields).map { "f\($0)(x: 1, y: \"s\")" }.joined(separator: " ") + " }"
    for (name, query) in [("wide", wide), ("deep", deep), ("args", args)] {
        let document = payload(query)
        var best = Double.infinity
        var worst = 0.0
        for _ in 0..<20 {
            let start = DispatchTime.now().uptimeNanoseconds
            do {
                _ = try SubscribeRequest.parse(document, limits: limits)
            } catch {
                print("\(name): refused: \(error.code) \(error.message)")
                break
            }
            let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
            best = min(best, ms)
            worst = max(worst, ms)
        }
        print("\(name): \(document.readableBytes) bytes, check+parse+key best \(String(format: "%.2f", best)) ms, worst \(String(format: "%.2f", worst)) ms")
    }
case "phases":
    // Parse and print timed apart, on a wide document of N fields and a nested one of N levels.
    guard let n = Int(arguments[2]) else { exit(64) }
    for (name, query) in [("wide", "query { " + (0..<n).map { "a\($0)" }.joined(separator: " ") + " }"), ("nested", nested(n))] {
        var t = DispatchTime.now().uptimeNanoseconds
        let document = try GraphQL.parse(source: query, noLocation: true)
        let parseMs = Double(DispatchTime.now().uptimeNanoseconds - t) / 1e6
        t = DispatchTime.now().uptimeNanoseconds
        _ = GraphQL.print(ast: document)
        let printMs = Double(DispatchTime.now().uptimeNanoseconds - t) / 1e6
        print("\(name) \(n): parse \(String(format: "%.1f", parseMs)) ms, print \(String(format: "%.1f", printMs)) ms")
    }
default:
    exit(64)
}
