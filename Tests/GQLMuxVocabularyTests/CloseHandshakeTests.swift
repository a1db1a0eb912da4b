import Testing

@testable import GQLMuxVocabulary

/// The close handshake on a manual clock: both endings (the peer answers, the peer is silent).
@Suite struct CloseHandshakeTests {
    @Test func thePeersCloseFrameCompletesOurCloseAtOnce() {
        var handshake = CloseHandshake(timeout: .seconds(1))
        let start = Instant(nanoseconds: 0)
        handshake.closeSent(generation: 3, now: start)
        #expect(handshake.isClosing(3))
        #expect(handshake.nextDeadline == start + .seconds(1))
        #expect(handshake.expired(now: start + .milliseconds(999)).isEmpty)
        #expect(handshake.peerClosed(generation: 3) == .completesOurs)  // close the socket now
        #expect(!handshake.isClosing(3))
        #expect(handshake.nextDeadline == nil)
        #expect(handshake.expired(now: start + .seconds(5)).isEmpty)  // nothing left to time out
    }

    @Test func aSilentPeerIsClosedAtTheTimeout() {
        var handshake = CloseHandshake(timeout: .seconds(1))
        let start = Instant(nanoseconds: 0)
        handshake.closeSent(generation: 1, now: start)
        handshake.closeSent(generation: 2, now: start + .milliseconds(500))
        #expect(handshake.expired(now: start + .milliseconds(999)).isEmpty)
        #expect(handshake.expired(now: start + .seconds(1)) == [1])
        #expect(handshake.nextDeadline == start + .milliseconds(1_500))
        #expect(handshake.expired(now: start + .seconds(2)) == [2])
        #expect(handshake.nextDeadline == nil)
        // A close frame that comes after the timeout is the peer's own close, not an answer.
        #expect(handshake.peerClosed(generation: 1) == .startsTheirs)
    }

    @Test func aCloseStartedByThePeerIsAnswered() {
        var handshake = CloseHandshake(timeout: .seconds(1))
        #expect(handshake.peerClosed(generation: 7) == .startsTheirs)
    }

    @Test func aDroppedSocketLeavesNothingToTimeOut() {
        var handshake = CloseHandshake(timeout: .seconds(1))
        let start = Instant(nanoseconds: 0)
        handshake.closeSent(generation: 4, now: start)
        handshake.socketClosed(generation: 4)
        #expect(handshake.nextDeadline == nil)
        #expect(handshake.expired(now: start + .seconds(2)).isEmpty)
    }
}
