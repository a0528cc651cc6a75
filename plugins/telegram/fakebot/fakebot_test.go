package fakebot

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// call makes one Bot API call with form parameters and decodes the answer.
func call(t *testing.T, s *Server, ctx context.Context, method string, params url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/bot"+Token+"/"+method, strings.NewReader(params.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func TestGetUpdatesHonoursOffset(t *testing.T) {
	s := New(t)
	a := s.PrivateText(1, "a")
	b := s.PrivateText(1, "b")
	if _, ok := s.ServedAt(a); ok {
		t.Fatal("an update counts as served before any getUpdates")
	}
	_, out := call(t, s, t.Context(), "getUpdates", url.Values{"offset": {"0"}})
	if n := len(out["result"].([]any)); n != 2 {
		t.Fatalf("%d updates, want 2", n)
	}
	first, ok := s.ServedAt(a)
	if !ok {
		t.Fatal("no time for a served update")
	}
	if s.Confirmed() != 0 {
		t.Error("serving confirmed something")
	}
	// Served again until confirmed; confirmed by a higher offset.
	_, out = call(t, s, t.Context(), "getUpdates", url.Values{"offset": {itoa(b)}})
	if n := len(out["result"].([]any)); n != 1 || s.Confirmed() != a {
		t.Fatalf("%d updates, confirmed %d; want 1 and %d", n, s.Confirmed(), a)
	}
	if again, _ := s.ServedAt(a); !again.Equal(first) {
		t.Error("serving an update again moved its first-served time")
	}
}

func TestGetUpdatesLongPolls(t *testing.T) {
	s := New(t)
	done := make(chan int, 1)
	go func() {
		_, out := call(t, s, t.Context(), "getUpdates", url.Values{"timeout": {"30"}})
		done <- len(out["result"].([]any))
	}()
	waitRequests(t, s, "getUpdates", 1)
	select {
	case <-done:
		t.Fatal("an empty poll returned at once")
	default:
	}
	s.PrivateText(1, "wake up")
	if n := <-done; n != 1 {
		t.Errorf("%d updates, want 1", n)
	}
	// A cancelled poll ends too.
	ctx, cancel := context.WithCancel(t.Context())
	go func() { call(t, s, ctx, "getUpdates", url.Values{"timeout": {"30"}, "offset": {"999999"}}); done <- 0 }()
	waitRequests(t, s, "getUpdates", 2)
	cancel()
	<-done
}

func TestFaults(t *testing.T) {
	s := New(t)
	s.Fail("sendMessage", 1, TooManyRequests(7))
	code, out := call(t, s, t.Context(), "sendMessage", url.Values{"chat_id": {"1"}, "text": {"hi"}})
	if code != 429 || out["parameters"].(map[string]any)["retry_after"] != 7.0 {
		t.Errorf("429: %d %v", code, out)
	}
	s.LoseAnswer("sendMessage", 1)
	if code, _ := call(t, s, t.Context(), "sendMessage", url.Values{"chat_id": {"1"}, "text": {"lost"}}); code != 0 {
		t.Errorf("a lost answer came back with %d", code)
	}
	if got := s.Texts(1); len(got) != 1 || got[0] != "lost" {
		t.Errorf("the lost answer's message was not applied: %q", got)
	}
	cases := []struct {
		name   string
		params url.Values
		want   string
	}{
		{"empty text", url.Values{"chat_id": {"1"}, "text": {" "}}, "message text is empty"},
		{"too long", url.Values{"chat_id": {"1"}, "text": {strings.Repeat("🦀", 2049)}}, "message is too long"},
		{"bad HTML", url.Values{"chat_id": {"1"}, "text": {"<x>"}, "parse_mode": {"HTML"}}, "can't parse entities"},
		{"bare ampersand", url.Values{"chat_id": {"1"}, "text": {"a & b"}, "parse_mode": {"HTML"}}, "can't parse entities"},
		{"long callback data", url.Values{"chat_id": {"1"}, "text": {"t"}, "reply_markup": {`{"inline_keyboard":[[{"text":"x","callback_data":"` + strings.Repeat("d", 65) + `"}]]}`}}, "BUTTON_DATA_INVALID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := call(t, s, t.Context(), "sendMessage", tc.params)
			if code != 400 || !strings.Contains(out["description"].(string), tc.want) {
				t.Errorf("%d %v, want 400 %q", code, out, tc.want)
			}
		})
	}
	// The empty copy_text go-telegram/bot sends with every button is fine.
	code, _ = call(t, s, t.Context(), "sendMessage", url.Values{"chat_id": {"1"}, "text": {"<b>ok</b> &amp;"}, "parse_mode": {"HTML"},
		"reply_markup": {`{"inline_keyboard":[[{"text":"Approve","callback_data":"tok","copy_text":{"text":""}}]]}`}})
	if code != 200 {
		t.Errorf("a valid message with a button: %d", code)
	}
	if code, _ := call(t, s, t.Context(), "getMe", nil); code != 200 {
		t.Errorf("getMe: %d", code)
	}
}

func waitRequests(t *testing.T, s *Server, method string, n int) {
	t.Helper()
	s.Wait(t, 5*time.Second, method, func() bool { return s.Count(method) >= n })
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestRequestPreviewDisabled(t *testing.T) {
	s := New(t)
	for _, tc := range []struct {
		lpo  string // link_preview_options, "" for none
		want bool
	}{
		{"", false},
		{`{"is_disabled":false}`, false},
		{`not json`, false},
		{`{"is_disabled":true}`, true},
	} {
		p := url.Values{"chat_id": {"1"}, "text": {"https://example.com"}}
		if tc.lpo != "" {
			p.Set("link_preview_options", tc.lpo)
		}
		call(t, s, t.Context(), "sendMessage", p)
		reqs := s.Requests()
		if got := reqs[len(reqs)-1].PreviewDisabled(); got != tc.want {
			t.Errorf("link_preview_options %q: PreviewDisabled %v, want %v", tc.lpo, got, tc.want)
		}
	}
}
