import Foundation
import GQLMuxFuzz
import GQLMuxTestSupport
import Testing

/// The libFuzzer targets' bodies over their seed corpus, in every test run (a debug build, so
/// SwiftNIO's own assertions hold; the libFuzzer runs themselves are scripts/fuzz.sh).
@Suite struct CorpusReplayTests {
    @Test func fuzzSeedCorpusReplays() throws {
        let root = URL(fileURLWithPath: repositoryRoot())
        var replayed: Set<String> = []
        let targets: [(folder: String, name: String, body: (UnsafeRawBufferPointer) -> Void)] = [
            ("local", "localLines", FuzzTargets.localLines), ("upstream", "upstreamMessage", FuzzTargets.upstreamMessage),
            ("streams", "httpStreams", FuzzTargets.httpStreams), ("endpoint", "endpoint", FuzzTargets.endpoint),
            ("headers", "endpointHeaders", FuzzTargets.endpointHeaders), ("handover", "handover", FuzzTargets.handover),
            ("frames", "upstreamFrames", FuzzTargets.upstreamFrames),
            ("frames", "upstreamFramesThroughAChannel", FuzzTargets.upstreamFramesThroughAChannel),
        ]
        for (folder, _, target) in targets {
            replayed.insert(folder)
            let dir = root.appendingPathComponent("Fuzz/corpus/\(folder)")
            let files = try FileManager.default.contentsOfDirectory(atPath: dir.path)
            #expect(files.count >= 5, "Fuzz/corpus/\(folder) has \(files.count) seeds")
            for file in files {
                let data = try Data(contentsOf: dir.appendingPathComponent(file))
                data.withUnsafeBytes { target($0) }
            }
        }
        let folders = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Fuzz/corpus").path)
        #expect(Set(folders) == replayed, "every corpus folder is replayed, and every replayed one exists")
        // Every harness libFuzzer runs (Fuzz/*.swift) has its body replayed here.
        let harnesses = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Fuzz").path).filter { $0.hasSuffix(".swift") }
        let called = try harnesses.flatMap { file in
            try String(contentsOf: root.appendingPathComponent("Fuzz/\(file)"), encoding: .utf8)
                .split(separator: "FuzzTargets.").dropFirst().map { String($0.prefix { $0.isLetter }) }
        }
        #expect(!called.isEmpty)
        #expect(Set(called).isSubset(of: targets.map(\.name)), "\(Set(called).subtracting(targets.map(\.name))) not replayed")
    }
}
