import NIOCore

/// A socket option of a channel, read at once on its loop: NIO's `getsockopt` answers with a
/// future, which on the channel's own loop is already complete. The peer's credentials and the
/// kernel's unread bytes are read through it.
enum SocketOptionNow {
    /// Option `name` at `level` of `channel`'s socket as a `Value` (the kernel's struct, laid out
    /// alike); nil when the channel is not a socket or the kernel refuses.
    static func read<Value: Sendable>(_ channel: any Channel, level: Int32, name: Int32, as type: Value.Type = Value.self) -> Value? {
        channel.eventLoop.preconditionInEventLoop()
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let future: EventLoopFuture<Value> = provider.unsafeGetSocketOption(level: SocketOptionLevel(level), name: SocketOptionName(name))
        let box = Box<Value>()
        future.whenSuccess { box.value = $0 }
        return box.value
    }

    /// `@unchecked Sendable` — safe because the future is already completed (a synchronous
    /// getsockopt on the channel's loop, asserted above), so `whenSuccess` runs on this thread
    /// before `read` returns, and the box never leaves it.
    private final class Box<Value>: @unchecked Sendable {
        var value: Value?
    }
}
