import GQLMuxFuzz

// libFuzzer entry point for the upstream connection's WebSocket frame reader, alone and through
// the frame handler in a channel whose writes read again; built by scripts/fuzz.sh.
/// libFuzzer's entry point for this target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUpstreamFrames(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTargets.upstreamFrames(UnsafeRawBufferPointer(start: data, count: size))
    FuzzTargets.upstreamFramesThroughAChannel(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
