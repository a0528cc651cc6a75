// Command testplugin is the pluginhost tests' handler, built on plugin.Serve.
// What a call does depends on its tool name; see Invoke.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

type handler struct {
	mu        sync.Mutex
	svc       plugin.Services
	config    map[string]any
	cancelled []string
	kept      context.Context
	events    []*plugin.Event

	barrier   int
	barrierCh chan struct{}
}

func main() {
	// Record every start, so a test can tell whether the executable ran.
	if data := os.Getenv("CARAPACE_PLUGIN_DATA"); data != "" {
		if f, err := os.OpenFile(filepath.Join(data, "starts"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(f, os.Getpid())
			f.Close()
		}
	}
	if err := plugin.Serve(&handler{barrierCh: make(chan struct{})}); err != nil {
		fmt.Fprintln(os.Stderr, "testplugin:", err)
		os.Exit(1)
	}
}

func (h *handler) Init(ctx context.Context, config map[string]any, svc plugin.Services) error {
	h.mu.Lock()
	h.svc, h.config = svc, config
	h.mu.Unlock()
	if config["fail"] == true {
		return plugin.NewInitError(plugin.CategoryAuth, errors.New("token rejected by the service"))
	}
	if key, ok := config["read_credential"].(string); ok {
		if _, err := svc.ReadCredential(ctx, key); err != nil {
			return plugin.NewInitError(plugin.CategoryConfig, err)
		}
	}
	return nil
}

func (h *handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	hang := h.config["hang_shutdown"] == true
	fail := h.config["fail_shutdown"] == true
	h.mu.Unlock()
	if hang {
		select {} // ignores ctx on purpose
	}
	if fail {
		return errors.New("could not flush")
	}
	return nil
}

func (h *handler) HandleEvent(ctx context.Context, ev *plugin.Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
	return nil
}

func (h *handler) Verify(ctx context.Context) (*plugin.VerifyResult, error) {
	return &plugin.VerifyResult{OK: true, Message: "all good"}, nil
}

func (h *handler) MemoryBrief(ctx context.Context, group string) (*plugin.Brief, error) {
	return &plugin.Brief{Entries: []plugin.BriefEntry{{ID: "m1", Type: "fact", Content: "brief for " + group}}, EntryCount: 3, BriefCount: 2, GeneratedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, nil
}

// Preview previews any call: its tool and arguments; the tool "blank"
// answers no preview at all.
func (h *handler) Preview(ctx context.Context, req *plugin.Request) (*plugin.Preview, error) {
	if req.Tool == "blank" {
		return nil, nil
	}
	b, _ := json.Marshal(req.Arguments)
	return &plugin.Preview{Text: "would run " + req.Tool + " with " + string(b) + "\nand digest " + req.PreviewDigest, Digest: plugin.Digest(b)}, nil
}

func (h *handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	args := req.Arguments
	switch req.Tool {
	case "echo":
		types := map[string]any{}
		for k, v := range args {
			types[k] = fmt.Sprintf("%T", v)
		}
		return map[string]any{
			"arguments": args, "types": types, "tool": req.Tool, "group": req.Group, "session": req.Session,
			"correlation": req.Correlation, "envelope_id": req.EnvelopeID, "time": req.Time.Format(time.RFC3339Nano),
			"preview_digest": req.PreviewDigest,
		}, nil
	case "env":
		wd, _ := os.Getwd()
		return map[string]any{"env": os.Environ(), "cwd": wd}, nil
	case "barrier": // returns once n calls are in it at the same time
		n, _ := args["n"].(interface{ Int64() (int64, error) })
		want, _ := n.Int64()
		h.mu.Lock()
		h.barrier++
		if int64(h.barrier) == want {
			close(h.barrierCh)
		}
		ch := h.barrierCh
		h.mu.Unlock()
		select {
		case <-ch:
			return map[string]any{"ok": true}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "block": // waits for its ctx to be cancelled, and records it
		<-ctx.Done()
		h.mu.Lock()
		h.cancelled = append(h.cancelled, fmt.Sprint(args["id"]))
		h.mu.Unlock()
		return nil, ctx.Err()
	case "cancelled":
		h.mu.Lock()
		defer h.mu.Unlock()
		return map[string]any{"cancelled": append([]string(nil), h.cancelled...)}, nil
	case "events":
		h.mu.Lock()
		defer h.mu.Unlock()
		var topics []any
		for _, ev := range h.events {
			var p struct{ N json.Number }
			_ = ev.Decode(&p)
			topics = append(topics, ev.Topic+":"+p.N.String())
		}
		return map[string]any{"events": topics}, nil
	case "crash":
		os.Exit(3)
	case "panic":
		panic("boom")
	case "null":
		return nil, nil
	case "toolerror":
		return nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: "the date is in the past", Retriable: true, Field: "date", RetryAfter: 7}
	case "internal":
		return nil, fmt.Errorf("dial api.example.com: %w", errors.New("secret detail"))
	case "big":
		n, _ := args["n"].(interface{ Int64() (int64, error) })
		size, _ := n.Int64()
		return map[string]any{"data": strings.Repeat("x", int(size))}, nil
	case "unencodable":
		return map[string]any{"ch": make(chan int)}, nil
	case "services":
		return h.services(ctx), nil
	case "svcflood": // n credential reads in a row: how many were refused?
		n, _ := args["n"].(interface{ Int64() (int64, error) })
		count, _ := n.Int64()
		ok, limited := 0, 0
		for range count {
			_, err := h.svc.ReadCredential(ctx, "api_key")
			switch {
			case err == nil:
				ok++
			case strings.Contains(err.Error(), "rate limit"):
				limited++
			default:
				return nil, err
			}
		}
		return map[string]any{"ok": ok, "limited": limited}, nil
	case "keepctx":
		h.mu.Lock()
		h.kept = ctx
		h.mu.Unlock()
		return map[string]any{}, nil
	case "stalectx": // a service call with the scope of a call that has ended
		h.mu.Lock()
		kept := h.kept
		h.mu.Unlock()
		_, err := h.svc.GetSessionInfo(context.WithoutCancel(kept))
		_, cerr := h.svc.ReadCredential(context.WithoutCancel(kept), "api_key")
		return map[string]any{"session_info": errText(err), "read_credential": errText(cerr)}, nil
	case "spawn":
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return map[string]any{"pid": cmd.Process.Pid}, nil
	case "flood":
		line := strings.Repeat("y", 80) + "\n"
		for i := 0; i < 100000; i++ {
			os.Stderr.WriteString(line)
		}
		os.Stdout.WriteString(strings.Repeat("z", 5000) + "\n")
		return map[string]any{"lines": 100000}, nil
	}
	return nil, plugin.NewToolError("unknown tool "+req.Tool, false)
}

// services calls every service with the call's ctx and reports the results.
func (h *handler) services(ctx context.Context) map[string]any {
	out := map[string]any{}
	info, err := h.svc.GetSessionInfo(ctx)
	out["session_info"] = map[string]any{"id": info.ID, "group": info.Group, "err": errText(err)}
	cred, err := h.svc.ReadCredential(ctx, "api_key")
	out["credential"] = map[string]any{"value": cred, "err": errText(err)}
	_, err = h.svc.ReadCredential(ctx, "missing")
	out["credential_missing"] = errText(err)
	cred, err = h.svc.ReadCredential(context.Background(), "api_key")
	out["credential_unscoped"] = map[string]any{"value": cred, "err": errText(err)}
	_, err = h.svc.GetSessionInfo(context.Background())
	out["session_info_unscoped"] = errText(err)
	cat, err := h.svc.GetToolCatalog(ctx)
	var names []any
	for _, t := range cat {
		names = append(names, t.Name)
	}
	out["catalog"] = map[string]any{"names": names, "err": errText(err)}
	entries, err := h.svc.GetAuditLog(ctx, plugin.AuditFilter{LastN: 5, Topic: "tool.invoke.x"})
	var topics []any
	for _, e := range entries {
		topics = append(topics, e.Topic)
	}
	out["audit"] = map[string]any{"topics": topics, "err": errText(err)}
	err = h.svc.PublishEvent(ctx, &plugin.Event{Topic: "message.inbound", Payload: json.RawMessage(`{"text":"hi"}`)})
	out["publish"] = errText(err)
	out["publish_elsewhere"] = errText(h.svc.PublishEvent(ctx, &plugin.Event{Topic: "message.inbound", Group: "elsewhere"}))
	paused, err := h.svc.Paused(ctx)
	out["paused"] = map[string]any{"paused": paused, "err": errText(err)}
	out["dropped"] = errText(h.svc.AuditDropped(ctx, "update 7 (message) from user 9"))
	out["health"] = errText(h.svc.ReportHealth(ctx, true, "cannot reach the service"))
	// The surface services, over the wire.
	out["decide"] = errText(h.svc.Decide(ctx, plugin.Decision{ID: "c1", Approve: true, ArgsHash: "h", Decider: "owner"}))
	out["decide_decided"] = errText(h.svc.Decide(ctx, plugin.Decision{ID: "decided", ArgsHash: "h"}))
	st, err := h.svc.CoreStatus(ctx)
	out["status"] = map[string]any{"version": st.Version, "paused": st.Paused, "err": errText(err)}
	out["set_paused"] = errText(h.svc.SetPaused(ctx, true))
	out["stop_session"] = errText(h.svc.StopSession(ctx, "s-beta"))
	return out
}

// errText names the Services sentinel err is, or gives its text.
func errText(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, plugin.ErrNoRequest):
		return "ErrNoRequest"
	case errors.Is(err, plugin.ErrNoCredential):
		return "ErrNoCredential"
	case errors.Is(err, plugin.ErrNotChannel):
		return "ErrNotChannel"
	case errors.Is(err, plugin.ErrNotSurface):
		return "ErrNotSurface"
	case errors.Is(err, plugin.ErrAlreadyDecided):
		return "ErrAlreadyDecided: " + err.Error()
	case errors.Is(err, plugin.ErrGroupNotGranted):
		return "ErrGroupNotGranted: " + err.Error()
	}
	return err.Error()
}
