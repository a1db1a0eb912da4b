import GQLMuxFuzz

// libFuzzer entry point for the upstream message parser and state machine; built by scripts/fuzz.sh.
/// libFuzzer's entry point for this target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUpstreamMessage(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTargets.upstreamMessage(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
