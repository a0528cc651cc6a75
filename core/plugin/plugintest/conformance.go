package plugintest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/skills"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/ipc"
)

// UnknownTool is the tool name Conformance calls to see how the handler
// refuses a tool it does not provide. It is a valid tool name, so that the
// handler takes its usual path for a name it does not know.
const UnknownTool = "plugintest_no_such_tool"

// Conformance checks a handler against the plugin in pluginDir (its
// manifest.json and skills/), in subtests:
//
//   - manifest: manifest.json loads and validates as the core loads it;
//   - init: the config (WithConfig; default {}) matches the manifest's
//     config_schema, every credential the manifest marks required is in
//     the Services' FakeCredentials, and Init succeeds;
//   - unknown_tool: calling UnknownTool returns a *plugin.ToolError with a
//     message, and not with a code the core reserves for itself;
//   - tools/<name>, for every declared tool: calling it with arguments
//     that match its schema — those given with WithSampleArgs, or generated
//     from the schema (required properties only; see skills.SampleArguments)
//     — neither panics, fails with a plain Go error (PLUGIN_ERROR), times
//     out, returns nothing, nor answers exactly as it answered the unknown
//     tool (the sign of a tool missing from the handler's switch); a
//     ToolError is fine: the handler handled the call. No result or error
//     may leak a credential (see AssertNoLeakOf);
//   - credentials: the handler read only credentials the manifest declares;
//   - skills: no skill file names a tool the manifest does not declare
//     (other findings of skills.Check are logged);
//   - shutdown: Shutdown succeeds.
//
// Arguments that do not match the schema are not tried: the core refuses
// them before the handler is called.
func Conformance(t *testing.T, pluginDir string, h plugin.Handler, opts ...Option) {
	t.Helper()
	conformance(realT{t}, pluginDir, h, opts...)
}

// tester is the part of *testing.T Conformance uses; its own tests give it
// a fake that records failures.
type tester interface {
	testing.TB
	run(name string, f func(t tester)) bool
}

type realT struct{ *testing.T }

func (t realT) run(name string, f func(tester)) bool {
	return t.T.Run(name, func(st *testing.T) { f(realT{st}) })
}

func conformance(t tester, dir string, h plugin.Handler, opts ...Option) {
	t.Helper()
	o := collect(opts)
	name := pluginName(dir)
	svc := o.services

	var m *manifest.Manifest
	if !t.run("manifest", func(t tester) {
		var err error
		if m, err = manifest.Load(dir, manifest.Options{}); err != nil {
			t.Fatalf("manifest.json does not load:\n%v", err)
		}
	}) {
		return
	}

	var hs *Harness
	if !t.run("init", func(t tester) {
		if err := m.ValidateConfig("config", o.config); err != nil {
			t.Fatalf("the config does not match the manifest's config_schema (give a valid one with WithConfig):\n%v", err)
		}
		for _, c := range m.Credentials() {
			if c.Required && !svc.Credentials.Has(c.Key) {
				t.Fatalf("the manifest marks credential %q required, and the core does not start the plugin without it: "+
					"give it with WithServices(&plugintest.Services{Credentials: plugintest.NewFakeCredentials(…)})", c.Key)
			}
		}
		hs = newHarness(t, h, o, name)
		hs.init(t, o.config)
	}) {
		return
	}

	var unknown *Result
	t.run("unknown_tool", func(t tester) {
		r := hs.invoke(t, UnknownTool, nil)
		unknown = &r
		switch {
		case r.OK():
			t.Errorf("the handler answered the unknown tool %q with success %s; "+
				"return plugin.NewToolError(\"… does not provide \"+req.Tool, false) instead", UnknownTool, r.JSON)
		case r.HandlerCode == "":
			t.Errorf("the handler refused the unknown tool %q with %s, not a *plugin.ToolError; "+
				"return plugin.NewToolError(…) so that the agent learns why:\n%s", UnknownTool, r.Code, r)
		case ipc.Code(r.HandlerCode).Reserved():
			t.Errorf("the handler refused the unknown tool with the code %s, which the core reserves for itself "+
				"(the agent sees HANDLER_ERROR): use plugin.NewToolError", r.HandlerCode)
		case strings.TrimSpace(r.Message) == "":
			t.Errorf("the handler refused the unknown tool with an empty message; say which tool is unknown")
		}
		reportAll(t, leaks(r, svc.Credentials.secrets()), svc)
	})

	for _, tool := range m.Provides.Tools {
		t.run("tools/"+tool.Name, func(t tester) {
			checkTool(t, hs, name, tool, o, unknown)
		})
	}

	t.run("credentials", func(t tester) {
		declared := map[string]bool{}
		for _, c := range m.Credentials() {
			declared[c.Key] = true
		}
		reads := svc.Credentials.Reads()
		slices.Sort(reads)
		for _, k := range slices.Compact(reads) {
			if !declared[k] {
				t.Errorf("the handler read credential %q, which manifest.json does not declare (install.credentials): "+
					"the user is never asked for it", k)
			}
		}
	})

	t.run("skills", func(t tester) {
		for _, w := range skills.Check(m, os.DirFS(filepath.Join(dir, manifest.SkillsDir))) {
			if w.Line > 0 {
				t.Errorf("%s", w)
			} else {
				t.Logf("%s", w)
			}
		}
	})

	t.run("shutdown", func(t tester) { hs.shutdown(t) })
}

func checkTool(t tester, hs *Harness, pname string, tool manifest.Tool, o options, unknown *Result) {
	t.Helper()
	args, given := o.samples[tool.Name]
	if given {
		var err error
		if args, err = normalize(args); err != nil {
			t.Fatalf("the arguments given with WithSampleArgs: %v", err)
		}
	} else {
		var err error
		if args, err = skills.SampleArguments(tool.ArgumentsSchema, time.Now()); err != nil {
			t.Fatalf("%v\nsupply arguments with plugintest.WithSampleArgs(%q, …)", err, tool.Name)
		}
	}
	schema, err := catalog.CompileSchema(pname+"/"+tool.Name, tool.ArgumentsSchema)
	if err != nil {
		t.Fatalf("the arguments_schema does not compile: %v", err)
	}
	if err := schema.Validate(args); err != nil {
		t.Fatalf("the arguments %s do not match the schema, so the core would refuse them before the handler: %s",
			compact(args), catalog.Explain(err).Message)
	}
	r := hs.invoke(t, tool.Name, args)
	switch {
	case r.Code == ipc.CodePluginError || r.Code == ipc.CodePluginTimeout:
		t.Errorf("%s with %s failed with %s:\n%s", tool.Name, compact(args), r.Code, r)
	case r.Code == ipc.CodeHandlerError && r.HandlerCode == "":
		t.Errorf("%s with %s was refused by the core: %s", tool.Name, compact(args), r)
	case unknown != nil && !unknown.OK() && sameRefusal(r, *unknown, tool.Name):
		t.Errorf("%s is declared in manifest.json, but the handler answers it exactly as it answers an unknown tool (%q): "+
			"is it missing from the handler's switch?", tool.Name, r.Message)
	case !r.OK():
		t.Logf("%s with %s returned a ToolError, which is fine (the handler handled it): %s", tool.Name, compact(args), r.Message)
	}
	if r.HandlerCode != "" && ipc.Code(r.HandlerCode).Reserved() {
		t.Errorf("%s returned a ToolError with the code %s, which the core reserves for itself (the agent sees HANDLER_ERROR)", tool.Name, r.HandlerCode)
	}
	reportAll(t, leaks(r, o.services.Credentials.secrets()), o.services)
}

// sameRefusal reports whether r, the answer to tool, is the answer to
// UnknownTool with the tool's name in place of UnknownTool.
func sameRefusal(r, unknown Result, tool string) bool {
	if r.OK() || r.Code != unknown.Code || r.HandlerCode != unknown.HandlerCode {
		return false
	}
	return r.Message == unknown.Message || r.Message == strings.ReplaceAll(unknown.Message, UnknownTool, tool)
}

func reportAll(t tester, problems []string, svc *Services) {
	t.Helper()
	for _, p := range problems {
		t.Errorf("credential leak: %s", scrub(p, svc.Credentials.secrets()))
	}
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return textutil.Clip(string(b), 500)
}

// pluginName is the plugin's identity: its folder's name.
func pluginName(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Base(dir)
}
