package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// The wire shapes of the control API's types: each golden file in
// testdata/wire holds one type's values, one JSON line each, as the server
// and the client marshal them (encoding/json, compact). A change to a
// type's fields, tags or omitempty shows here as a changed file.

var (
	wireTime = time.Date(2026, 3, 14, 9, 26, 53, 589793000, time.UTC)
	wireZone = time.Date(2026, 3, 14, 10, 26, 53, 0, time.FixedZone("CET", 3600))
	exit3    = 3
)

var (
	wirePlugin = api.PluginStatus{Name: "telegram", Healthy: false, Category: "NETWORK_ERROR", State: "degraded", Source: "user",
		Dir: "/home/u/.carapace/plugins/telegram", Version: "1.2.0", Tools: []string{"telegram_send", "telegram_status"}, PID: 4242,
		Problem: "getUpdates: connection refused", Restarts: 2, NextTry: wireZone}
	wireEngine  = api.EngineStatus{Name: "docker", Version: "27.3.1", Bin: "/opt/homebrew/bin/docker", BinFrom: "Homebrew, not on PATH"}
	wireSession = api.Session{ID: "s-r35umrvqcw3sw", Group: "main", Socket: "/home/u/.carapace/run/s-r35umrvqcw3sw.sock",
		Runtime: "docker", Started: wireTime, Skills: "/home/u/.carapace/run/s-r35umrvqcw3sw/skills", ClaudeMD: "/home/u/.carapace/run/s-r35umrvqcw3sw/CLAUDE.md"}
	wireStatus = api.Status{Version: "v0.23.0", PID: 31337, Started: wireTime, Home: "/home/u/.carapace", Sessions: 2,
		PendingConfirmations: 1, Tools: 17, Plugins: []api.PluginStatus{wirePlugin, {Name: "echo", Healthy: true, State: "healthy", Source: "builtin"}},
		Draining: true, Paused: true, Engines: []api.EngineStatus{wireEngine}, ConfigDigest: "sha256:5e884898da28047151d0e56f8dc62927"}
	wireConfirmation = api.Confirmation{ID: "9f1c2a7e4b3d4c1f8e2a6b5d7c9e0f11", Tool: "send_email", Group: "main", Session: "s-r35umrvqcw3sw",
		Correlation: "0b6f3c525d7e4b8a9a512f7d3e9c1a44", ArgsHash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Arguments: json.RawMessage(`{"to":"a@example.com","body":"[REDACTED]"}`), ArgumentsOmitted: true,
		Hidden: []api.Hidden{{Path: "body", Kind: "bearer", Chars: 41}, {Path: "", Kind: "private-key", Chars: 0}}, Raw: true,
		Summary: "every day at 09:00", CreatedAt: wireTime, ExpiresAt: wireZone, Decision: "approved", Surface: "telegram", Decider: "12345",
		DecidedAt: &wireZone, Reason: "the session ended"}
	wireRun = api.TaskRun{ID: 7, Task: "t-ab12cd34", Scheduled: wireTime, Manual: true, Until: &wireZone, Count: 3, State: "skipped",
		Reason: "missed", LateMS: 1500, Session: "s-r35umrvqcw3sw", Started: &wireTime, Ended: &wireZone}
	wireCheck = api.ProveCheck{Name: "no route out: a public IP", Side: api.ProveSideBox, Passed: true,
		Detail: "TCP 1.1.1.1:443: connect: network is unreachable", Control: "TCP to its own listener on 127.0.0.1 worked"}
	wireTask = api.Task{ID: "t-ab12cd34", Group: "main", Kind: "cron", Expr: "0 9 * * *", Zone: "Europe/Lisbon", Schedule: "every day at 09:00",
		Prompt: "summarise my mail", Creator: "agent", CreatorSession: "s-r35umrvqcw3sw", CreatorConfirmation: "9f1c2a7e4b3d4c1f8e2a6b5d7c9e0f11",
		Misfire: "skip", Enabled: true, PausedReason: "3 failed runs", CreatedAt: wireTime, Next: &wireZone, NextFires: []time.Time{wireTime, wireZone},
		Last: &wireRun, RemovedAt: &wireTime, RemovedBy: "agent", RemovedSession: "s-r35umrvqcw3sw", RemovedConfirmation: "9f1c2a7e4b3d4c1f8e2a6b5d7c9e0f11"}
)

// wireValues are the golden values by file: a value with every field set,
// and the zero value (what omitempty leaves out).
var wireValues = map[string][]any{
	"status.json":        {wireStatus, api.Status{}},
	"engine-status.json": {wireEngine, api.EngineStatus{}},
	"plugin-status.json": {wirePlugin, api.PluginStatus{}},
	"plugin-check.json": {api.PluginCheck{Name: "calendar", Checked: true, OK: false, Message: "the CalDAV server refused the username and password",
		Fix: "carapace auth set --plugin calendar --key caldav_password"}, api.PluginCheck{}},
	"session.json": {wireSession, api.Session{}},
	"session-request.json": {api.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"sh", "-c", "echo hi"},
		Prompt: "hello", Conversation: "chat-42"}, api.SessionRequest{}},
	"output.json": {api.Output{Stream: "stderr", Data: "line\n", Exit: &exit3, Error: "the agent was stopped"}, api.Output{}},
	"confirmation.json": {wireConfirmation, api.Confirmation{},
		api.Confirmation{ID: "9f1c2a7e4b3d4c1f8e2a6b5d7c9e0f11", Tool: "t", Arguments: json.RawMessage(`[1,2]`), CreatedAt: wireTime, ExpiresAt: wireTime}},
	"hidden.json": {api.Hidden{Path: "a.b[2]", Kind: "sensitive-key", Chars: 12}, api.Hidden{}},
	"decision.json": {api.Decision{ID: "9f1c2a7e4b3d4c1f8e2a6b5d7c9e0f11", Approve: true, ArgsHash: "e3b0c442", Surface: "cli", Decider: "alice", Raw: true},
		api.Decision{}},
	"task.json":         {wireTask, api.Task{}},
	"task-run.json":     {wireRun, api.TaskRun{}},
	"task-request.json": {api.TaskRequest{Group: "main", Kind: "every", Expr: "1h", Zone: "UTC", Misfire: "catch-up-once", Prompt: "check"}, api.TaskRequest{}},
	"watch-event.json": {
		api.WatchEvent{Type: api.WatchSnapshot, Time: wireTime, Status: &wireStatus, Sessions: []api.Session{wireSession},
			Confirmations: []api.Confirmation{wireConfirmation}, Plugins: []api.PluginStatus{wirePlugin}, Tasks: []api.Task{wireTask}},
		api.WatchEvent{Type: api.WatchConfirmationRequested, Time: wireTime, Confirmation: &wireConfirmation},
		api.WatchEvent{Type: api.WatchSessionOpened, Time: wireTime, Session: &wireSession},
		api.WatchEvent{Type: api.WatchPluginHealth, Time: wireTime, Plugin: &wirePlugin},
		api.WatchEvent{Type: api.WatchTaskFired, Time: wireTime, Task: &wireTask, TaskRun: &wireRun},
		api.WatchEvent{Type: api.WatchEnd, Time: wireTime, Error: "the core is stopping"},
		api.WatchEvent{},
	},
	"prove-request.json": {api.ProveRequest{Sides: []string{api.ProveSidePlugin}}, api.ProveRequest{}},
	"prove-event.json": {
		api.ProveEvent{Stage: "starting the agent's box (docker)"},
		api.ProveEvent{Check: &wireCheck},
		api.ProveEvent{Report: &api.ProveReport{Engine: "docker", Checks: []api.ProveCheck{wireCheck}}},
		api.ProveEvent{Error: "the core is shutting down"},
		api.ProveEvent{},
	},
	// The names on the wire: the watch's line types, the topics it
	// follows, and the runtimes a session may ask for.
	"names.json": {
		[]string{api.WatchSnapshot, api.WatchConfirmationRequested, api.WatchConfirmationResolved, api.WatchSessionOpened,
			api.WatchSessionClosed, api.WatchPluginHealth, api.WatchStatus, api.WatchTaskCreated, api.WatchTaskChanged,
			api.WatchTaskFired, api.WatchTaskFinished, api.WatchTaskRemoved, api.WatchEnd},
		api.WatchTopics,
		api.Runtimes,
		api.ProveSides,
	},
}

// TestWireShapes marshals each value and compares the lines with the
// type's golden file (go test -update rewrites them); then it decodes each
// golden line into the type and marshals it again: the same bytes, so the
// decoding side reads every field the encoding side writes.
func TestWireShapes(t *testing.T) {
	for file, values := range wireValues {
		t.Run(file, func(t *testing.T) {
			var got bytes.Buffer
			for _, v := range values {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatalf("marshal %T: %v", v, err)
				}
				got.Write(append(b, '\n'))
			}
			path := filepath.Join("testdata", "wire", file)
			testutil.Golden(t, path, got.Bytes())
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
			if len(lines) != len(values) {
				t.Fatalf("%s has %d lines, want %d", path, len(lines), len(values))
			}
			for i, line := range lines {
				if err := roundTrip(reflect.TypeOf(values[i]), line); err != nil {
					t.Errorf("line %d: %v", i+1, err)
				}
			}
		})
	}
}

// roundTrip decodes line into a new value of type typ and checks that it
// marshals to line again.
func roundTrip(typ reflect.Type, line []byte) error {
	v := reflect.New(typ)
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return fmt.Errorf("decode into %s: %w", typ, err)
	}
	again, err := json.Marshal(v.Elem().Interface())
	if err != nil {
		return fmt.Errorf("marshal %s: %w", typ, err)
	}
	if !bytes.Equal(again, line) {
		return fmt.Errorf("%s decoded and marshalled again:\n%s\nwant\n%s", typ, again, line)
	}
	return nil
}

// TestWireFilesAreAllKnown fails on a file in testdata/wire that no value
// writes: a renamed type must not leave its old golden file behind.
func TestWireFilesAreAllKnown(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "wire"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := wireValues[e.Name()]; !ok {
			t.Errorf("testdata/wire/%s is not a golden file of this test: delete it", e.Name())
		}
	}
}
