package events_test

import (
	"context"
	"testing"

	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
)

// BenchmarkPublish publishes a typical event (seed 000's inbound message)
// to one in-process subscriber that drains its channel. No remote is
// connected, so zmq4's PUB queues and discards. Each iteration encodes the
// payload too (NewEvent), as a publisher does: the figure is an event's
// whole way from its producer's value to its subscriber.
func BenchmarkPublish(b *testing.B) {
	bus := openBus(b, events.Options{Buffer: 1024})
	s, err := bus.Subscribe(plugin.TopicMessageInbound.Name())
	if err != nil {
		b.Fatal(err)
	}
	drained := make(chan int)
	go func() {
		n := 0
		for range s.C() {
			n++
		}
		drained <- n
	}()
	payload := map[string]any{
		"channel": "telegram", "sender": "channel-specific-identifier", "content_type": "text",
		"body":     "Hey can you check the weather?",
		"metadata": map[string]any{"reply_to": nil, "attachments": []any{}},
	}
	ctx := context.Background()
	b.ReportAllocs()
	published := 0
	for b.Loop() {
		published++
		ev, err := plugin.NewEvent(plugin.TopicMessageInbound.Name(), "family-chat", payload)
		if err != nil {
			b.Fatal(err)
		}
		ev.Source = "telegram"
		if err := bus.Publish(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = s.Close()
	if n := <-drained; uint64(n)+s.Dropped() != uint64(published) {
		b.Fatalf("the subscriber got %d and dropped %d of %d", n, s.Dropped(), published)
	}
}
