package control

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
)

// TestChangeLines: a change's line, written around its payload's bytes,
// is byte for byte the line of core/api's golden file for the
// api.WatchEvent that holds the payload decoded (what the stream wrote
// when the core decoded each change and encoded it again): the stream's
// JSON is unchanged, and no change is decoded on its way.
func TestChangeLines(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "api", "testdata", "wire", "watch-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		var m map[string]json.RawMessage
		var head struct {
			Type string    `json:"type"`
			Time time.Time `json:"time"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(line, &head); err != nil {
			t.Fatal(err)
		}
		member, ok := watchMembers[head.Type]
		if !ok {
			continue // the snapshot, the end: not changes
		}
		payload := m[member]
		if member == "" { // a task change: {"task", "task_run"}
			payload = []byte(`{"task":` + string(m["task"]) + `,"task_run":` + string(m["task_run"]) + `}`)
		}
		got, err := changeLine(Change{Type: head.Type, Time: head.Time, Payload: payload})
		if err != nil {
			t.Fatalf("%s: %v", head.Type, err)
		}
		if want := append(line, '\n'); !bytes.Equal(got, want) {
			t.Errorf("%s:\n%s\nwant the golden line\n%s", head.Type, got, want)
		}
		checked++
	}
	if checked < 4 {
		t.Fatalf("checked %d golden change lines, want the 4 of watch-event.json", checked)
	}
}

// TestChangeLinesOfEveryType: each watch topic's line is json.Encoder's
// for the api.WatchEvent holding its payload decoded; an unknown type is
// its type and time alone; a payload that is not one compact object is
// refused, for it would break the stream's lines.
func TestChangeLinesOfEveryType(t *testing.T) {
	when := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	st := api.Status{Version: "v1", Paused: true}
	task := api.Task{ID: "t-1", Group: "main"}
	run := api.TaskRun{ID: 7, Task: "t-1"}
	conf := api.Confirmation{ID: "c", Arguments: json.RawMessage(`{"html":"\u003cb\u003e"}`)}
	sess := api.Session{ID: "s", Group: "main"}
	plug := api.PluginStatus{Name: "echo", Healthy: true}
	for _, typ := range api.WatchTopics {
		ev := api.WatchEvent{Type: typ, Time: when}
		var payload any
		switch watchMembers[typ] {
		case "confirmation":
			ev.Confirmation, payload = &conf, conf
		case "session":
			ev.Session, payload = &sess, sess
		case "plugin":
			ev.Plugin, payload = &plug, plug
		case "status":
			ev.Status, payload = &st, st
		case "":
			ev.Task, payload = &task, map[string]any{"task": task}
			if strings.HasSuffix(typ, "fired") {
				ev.TaskRun, payload = &run, struct {
					Task api.Task    `json:"task"`
					Run  api.TaskRun `json:"task_run"`
				}{task, run}
			}
		}
		p, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		got, err := changeLine(Change{Type: typ, Time: when, Payload: p})
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(ev); err != nil {
			t.Fatal(err)
		}
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: %s (%v)\nwant %s", typ, got, err, want.Bytes())
		}
	}
	if got, err := changeLine(Change{Type: "core.newer", Time: when, Payload: []byte(`{"x":1}`)}); err != nil || string(got) != `{"type":"core.newer","time":"2026-05-06T07:08:09.00000001Z"}`+"\n" {
		t.Errorf("an unknown type: %s, %v", got, err)
	}
	for _, bad := range []string{``, `[1]`, `{"a":1`, "{\"a\":\n1}", `"x"`} {
		if got, err := changeLine(Change{Type: api.WatchSessionOpened, Time: when, Payload: []byte(bad)}); err == nil {
			t.Errorf("payload %q: line %s, want an error", bad, got)
		}
	}
}
