import Foundation
import SwiftProtobuf
import Testing
@testable import Ubiquity

/// Store events decoded from the feed's messages, without a server: the cancelled DID_CHANGE and
/// the acknowledgement an opted-in feed's WILL_CHANGE carries (docs/lifecycle.md).
@Suite(.timeLimit(.minutes(1))) struct StoreEventTests {
    let deadline = Date(timeIntervalSince1970: 1_800_000_000)

    func message(_ event: Ubiquity_V1_StoreEvent, token: String) -> Ubiquity_V1_SubscribeResponse {
        .with {
            $0.resumeToken = Data(token.utf8)
            $0.storeEvent = event
        }
    }

    @Test func aWillChangeCarriesItsAcknowledgementAndTheDeliveringSession() {
        var resumer = FeedResumer(start: .now, reconnectFor: .seconds(60))
        let will = Ubiquity_V1_StoreEvent.with {
            $0.phase = .willChange
            $0.transition = .accountRemoved
            $0.acknowledgement = .with {
                $0.eventToken = Data("t7".utf8)
                $0.deadline = Google_Protobuf_Timestamp(date: deadline)
            }
        }
        let event = resumer.received(message(will, token: "t7"), session: "s1")
        let ack = event.storeEvent?.acknowledgement
        #expect(ack?.eventToken == GenerationToken(Data("t7".utf8)) && ack?.deadline == deadline)
        // Sent later with the session of the stream that delivered it, not the client's current one.
        #expect(ack?.session == "s1")
        // Equal to the same event delivered on another stream (the session is how, not what).
        #expect(ack == StoreEvent.Acknowledgement(eventToken: GenerationToken(Data("t7".utf8)), deadline: deadline))
        #expect(event.storeEvent?.cancelled == false)
    }

    @Test func aDidChangeOfATransitionThatDidNotHappenIsCancelled() {
        let did = StoreEvent(
            proto: .with {
                $0.phase = .didChange
                $0.transition = .accountRemoved
                $0.cancelled = true
            })
        #expect(did == StoreEvent(phase: .didChange, transition: .accountRemoved, cancelled: true))
        #expect(did.acknowledgement == nil)
        // A feed that did not opt in gets no acknowledgement on its WILL_CHANGE.
        let will = StoreEvent(proto: .with { $0.phase = .willChange; $0.transition = .contentRemoved })
        #expect(will == StoreEvent(phase: .willChange, transition: .contentRemoved))
    }
}
