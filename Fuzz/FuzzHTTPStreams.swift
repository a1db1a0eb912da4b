import GQLMuxFuzz

// libFuzzer entry point for the multipart and SSE stream readers; built by scripts/fuzz.sh.
/// libFuzzer's entry point for this target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPStreams(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTargets.httpStreams(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
