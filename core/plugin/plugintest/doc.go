// Package plugintest tests a Carapace plugin handler in process, the way the
// core runs it, without a core, a socket or a container.
//
// The core does more to a tool call than call Invoke: it passes a context
// that carries the request's scope and the 30 s handler timeout; it turns a
// panic or a plain Go error into a generic PLUGIN_ERROR whose detail only the
// host's audit log sees; it shows every *plugin.ToolError as HANDLER_ERROR,
// whatever code the handler put in it; it refuses a nil result and one over
// 1 MiB; and it sanitises the result, redacting anything that looks like a
// credential, before the agent sees it. A Harness does the same, so that a
// test sees what the agent would see — and, in Result.Detail, what the audit
// log would say.
//
// A typical test:
//
//	func TestSearch(t *testing.T) {
//		creds := plugintest.NewFakeCredentials(map[string]string{"api-key": "k-123"})
//		h := plugintest.New(t, &notes.Handler{}, plugintest.WithServices(&plugintest.Services{Credentials: creds}))
//
//		r := h.Invoke("search_notes", plugintest.Args(t, `{"query": "milk", "limit": 5}`))
//		data := plugintest.AssertSuccess(t, r)
//		if data["count"] != json.Number("1") { … }
//		plugintest.AssertNoLeakOf(t, r, creds)
//
//		r = h.Invoke("search_notes", plugintest.Args(t, `{"query": ""}`), plugintest.WithGroup("family"))
//		plugintest.AssertError(t, r, ipc.CodeHandlerError)
//	}
//
// and one conformance test per plugin, which checks the handler against its
// manifest.json: every declared tool is handled, an unknown tool is refused
// with a ToolError, nothing panics or leaks a credential:
//
//	func TestConformance(t *testing.T) {
//		plugintest.Conformance(t, ".", &notes.Handler{})
//	}
//
// Numbers: the core decodes arguments with json.Decoder.UseNumber, so a
// handler receives numbers as json.Number; the harness normalises the
// arguments it is given the same way (a Go int 5 arrives as json.Number("5")).
// Result.Value is decoded the same way too, so that large integers survive
// exactly: compare numbers with json.Number("5"), or use Result.JSON.
//
// The package depends on the core's own mapping of a handler's outcome to
// the agent's answer (core/outcome, which the pipeline uses too), sanitiser
// (core/sanitize), schema compiler (core/catalog) and manifest parser
// (core/manifest), so what it checks is what the core enforces; it never
// starts a server.
package plugintest
