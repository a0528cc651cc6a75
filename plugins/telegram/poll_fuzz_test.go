package telegram

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeUpdates feeds getUpdates answers — unknown kinds, unknown
// union types, wrong types, missing ids, malformed JSON — to the decoder
// of the poll. It never panics; each update is either decoded, with its
// id, or described by a problem that holds nothing of its content; and a
// kind or chat type recorded for an undecodable one is a plain word.
func FuzzDecodeUpdates(f *testing.F) {
	for _, seed := range []string{
		`{"ok":true,"result":[]}`,
		`{"ok":true,"result":[{"update_id":1,"message":{"message_id":1,"date":1,"chat":{"id":5,"type":"private"},"from":{"id":5,"is_bot":false,"first_name":"a"},"text":"hi"}}]}`,
		`{"ok":true,"result":[{"update_id":2,"message":{"message_id":1,"date":1,"chat":{"id":5,"type":"private"},"text":"x","forward_origin":{"type":"future","date":1}}}]}`,
		`{"ok":true,"result":[{"update_id":3,"message":{"message_id":"one"}},{"update_id":4,"future_kind":{"a":1}}]}`,
		`{"ok":true,"result":[{"message":{}},{"update_id":"5"},7,null,"x",[]]}`,
		`{"ok":true,"result":[{"update_id":6,"callback_query":{"id":"q","from":{"id":5},"message":{"message_id":1,"date":0,"chat":{"id":5,"type":"private"}},"data":"t"}}]}`,
		`{"ok":true,"result":[{"update_id":7,"message":{"chat":{"id":5,"type":"<b>"},"external_reply":{"origin":{"type":"bogus"}}}}]}`,
		`{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":3}}`,
		`{"ok":true,"result":[{"update_id":8,`,
		`not json`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ups, err := decodeUpdates(body)
		if err != nil {
			if ups != nil {
				t.Fatalf("an error (%v) and updates", err)
			}
			return
		}
		for i, u := range ups {
			switch {
			case u.Update != nil:
				if u.ID <= 0 || u.ID != u.Update.ID || u.Problem != "" {
					t.Fatalf("update %d decoded as id %d (update_id %d), problem %q", i, u.ID, u.Update.ID, u.Problem)
				}
			case u.Problem == "":
				t.Fatalf("update %d neither decoded nor given a problem", i)
			}
			if !plainASCII(u.Problem) || len(u.Problem) > 200 {
				t.Fatalf("problem %q: want a short plain text", u.Problem)
			}
			if u.Update == nil && (!kindRE.MatchString(u.Info.Kind) || (u.Info.ChatType != "" && !kindRE.MatchString(u.Info.ChatType))) {
				t.Fatalf("an undecodable update recorded as kind %q in a chat of type %q", u.Info.Kind, u.Info.ChatType)
			}
			if u.Update == nil && u.Info.ID != u.ID {
				t.Fatalf("id %d, lenient id %d", u.ID, u.Info.ID)
			}
		}
		// Each update decodes the same on its own as in the batch.
		var whole struct {
			Result []json.RawMessage `json:"result"`
		}
		if json.Unmarshal(body, &whole) == nil && len(whole.Result) == len(ups) {
			for i, raw := range whole.Result {
				if one := decodeUpdate(raw); one.ID != ups[i].ID || one.Problem != ups[i].Problem {
					t.Fatalf("update %d: alone %d %q, in the batch %d %q", i, one.ID, one.Problem, ups[i].ID, ups[i].Problem)
				}
			}
		}
	})
}

// plainASCII reports whether s is printable ASCII: nothing of an update's
// content (which may be anything) fits in a problem unnoticed.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
