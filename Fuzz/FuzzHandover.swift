import GQLMuxFuzz

// libFuzzer entry point for the online restart's handover record; built by scripts/fuzz.sh.
/// libFuzzer's entry point for this target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHandover(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTargets.handover(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
