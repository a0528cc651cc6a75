package llmproxy

import (
	"strings"
	"testing"
)

// feed writes s to a new scanner in chunks of n bytes.
func feed(s string, n int) usage {
	var u usage
	sc := &sseScanner{u: &u}
	for len(s) > 0 {
		k := min(n, len(s))
		sc.Write([]byte(s[:k]))
		s = s[k:]
	}
	return u
}

func TestSSEScanner(t *testing.T) {
	stream := sseFirst + sseRest
	want := usage{Model: "claude-opus-4-1", Input: 10, CacheRead: 5, Output: 42, Known: true}
	for _, n := range []int{1, 2, 3, 7, 64, 1000, len(stream)} {
		if got := feed(stream, n); got != want {
			t.Errorf("chunks of %d: %+v, want %+v", n, got, want)
		}
	}
	if got := feed(strings.ReplaceAll(stream, "\n", "\r\n"), 5); got != want {
		t.Errorf("CRLF: %+v, want %+v", got, want)
	}

	tests := []struct {
		name   string
		stream string
		want   usage
	}{
		{
			"no event lines",
			`data: {"type":"message_start","message":{"model":"m1","usage":{"input_tokens":3}}}` + "\n\n" +
				`data: {"type":"message_delta","usage":{"output_tokens":4}}` + "\n\n",
			usage{Model: "m1", Input: 3, Output: 4, Known: true},
		},
		{
			"a content line over the bound is skipped",
			sseFirst + "event: content_block_delta\ndata: " + strings.Repeat("x", 3*maxEventLine) + "\n\n" +
				"data: " + strings.Repeat("y", 2*maxEventLine) + "\n\n" +
				"event: message_delta\n" + `data: {"type":"message_delta","usage":{"output_tokens":9}}` + "\n\n",
			usage{Model: "claude-opus-4-1", Input: 10, CacheRead: 5, Output: 9, Known: true},
		},
		{
			"cumulative input in message_delta",
			sseFirst + "event: message_delta\n" + `data: {"type":"message_delta","usage":{"input_tokens":12,"cache_creation_input_tokens":7,"output_tokens":9}}` + "\n\n",
			usage{Model: "claude-opus-4-1", Input: 12, CacheWrite: 7, CacheRead: 5, Output: 9, Known: true},
		},
		{
			"error event",
			sseFirst + "event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n",
			usage{Model: "claude-opus-4-1", Input: 10, CacheRead: 5, Output: 1, Known: true, ErrorType: "overloaded_error"},
		},
		{
			"hostile error type",
			"event: error\n" + `data: {"type":"error","error":{"type":"` + promptMarker + `"}}` + "\n\n",
			usage{ErrorType: "unknown_error"},
		},
		{
			"hostile model",
			`data: {"type":"message_start","message":{"model":"` + promptMarker + ` x","usage":{"input_tokens":1}}}` + "\n\n",
			usage{Model: "(invalid)", Input: 1, Known: true},
		},
		{"garbage", "event: message_start\ndata: {not json\n\n: comment\n\nretry: 10\n", usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{1, 13, 1 << 20} {
				if got := feed(tt.stream, n); got != tt.want {
					t.Errorf("chunks of %d: %+v, want %+v", n, got, tt.want)
				}
			}
		})
	}
}

func TestJSONTail(t *testing.T) {
	j := &jsonTail{limit: maxJSONReply}
	j.Write([]byte(messageJSON[:10]))
	j.Write([]byte(messageJSON[10:]))
	var u usage
	if err := j.parse(&u); err != nil {
		t.Fatal(err)
	}
	if want := (usage{Model: "claude-sonnet-4-5", Input: 100, CacheWrite: 20, CacheRead: 30, Output: 50, Known: true}); u != want {
		t.Errorf("%+v, want %+v", u, want)
	}

	small := &jsonTail{limit: 8}
	small.Write([]byte(messageJSON))
	if err := small.parse(&u); err == nil {
		t.Error("a reply over the bound parsed")
	}

	e := &jsonTail{limit: 1024}
	e.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"x"}}`))
	if got := e.errorType(); got != "overloaded_error" {
		t.Errorf("errorType %q", got)
	}
	if got := requestModel([]byte(messagesBody)); got != "claude-sonnet-4-5" {
		t.Errorf("requestModel %q", got)
	}
}
