package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/llmproxy"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/atomicfile"
	"github.com/carapace-dev/carapace/keychain"
)

// telegramTokenKey is the credential the Telegram plugin reads its bot
// token from (plugins/telegram.CredentialKey; a test keeps them equal).
const telegramTokenKey = "bot_token"

// setupFlags are the answers `carapace setup` takes from its flags.
type setupFlags struct {
	yes                bool
	engine, image      string
	buildImage         bool
	ipc                string
	llmKeyStdin, oauth bool
	// llmProvider, llmUpstream, llmAuth and llmModel set [llm] provider,
	// upstream, auth and model.
	llmProvider, llmUpstream, llmAuth, llmModel string
	telegramStdin                               bool
	telegramPair                                bool
	calendar                                    calendarFlags
	mail                                        mailSetupFlags
	service                                     bool
}

func (a *app) setupCmd() *cobra.Command {
	var f setupFlags
	c := &cobra.Command{
		Use:   "setup",
		Short: "Set up Carapace: home, config.toml, container engine, agent image, model key, Telegram, mail, service",
		Long: `Set up Carapace, step by step, and say what each step found or changed:

  home       create the home (folders 0700)
  config     write a commented config.toml (every setting at its default)
  engine     check the container engine (Apple container on macOS, Docker,
             Podman) and say what to install or start when it is missing
  image      check the agent image, or build it (--build-image; it needs a
             registry for its base image and npm for Claude Code), or use
             one you have (--image)
  model API  choose the model API: Anthropic, a local Ollama (found when
             it runs, with its models) or llama-server, or a gateway
             (--llm-provider, --llm-upstream, --llm-auth, --llm-model)
  model key  store the model API's key (read hidden, or --llm-key-stdin);
             a local model takes none
  telegram   store a Telegram bot token and pair your account (optional)
  calendar   the calendar plugin: CalDAV URL, user, password (kept in the
             credential store) and time zone (optional; docs/CALENDAR.md)
  mail       add a mail account and store its app password (optional;
             --mail-address, docs/MAIL.md)
  service    start the core at login: a systemd user service on Linux, a
             LaunchAgent on macOS (optional; the menu-bar app can instead)

In a terminal it asks for what is missing. With --yes it never asks: it
does what the flags say and leaves the rest alone; without a terminal,
--yes is required, so that no prompt ever waits on a script. Running it
again changes only what you change: a stored key, a config.toml with your
edits, an installed service are kept.

Exit status 1 when a step failed (the message names the command that
fixes it); steps left undone are warnings, and carapace doctor checks the
result.`,
		Example: `  carapace setup
  printf %s "$ANTHROPIC_API_KEY" | carapace setup --yes --llm-key-stdin
  carapace setup --yes --engine docker --image carapace-agent-test:dev
  carapace setup --yes --build-image --service
  carapace setup --yes --llm-provider ollama --llm-model qwen3-coder
  printf %s "$BOT_TOKEN" | carapace setup --yes --telegram-token-stdin --telegram-pair
  printf %s "$APP_PASSWORD" | carapace setup --yes --calendar-url https://caldav.fastmail.com/dav/calendars/user/me@fastmail.com/ --calendar-user me@fastmail.com --calendar-zone Europe/Paris --calendar-password-stdin
  printf %s "$APP_PASSWORD" | carapace setup --yes --mail-address me@fastmail.com --mail-password-stdin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.setup(cmd, f)
		},
	}
	fl := c.Flags()
	fl.BoolVarP(&f.yes, "yes", "y", false, "never ask: do what the flags say, leave the rest as it is")
	fl.StringVar(&f.engine, "engine", "", "set runtime.engine: "+strings.Join(config.Engines, ", "))
	fl.StringVar(&f.image, "image", "", "use this agent image, which the engine must have (sets runtime.image)")
	fl.BoolVar(&f.buildImage, "build-image", false, "build the agent image carapace-agent:VERSION (needs a registry and npm)")
	fl.StringVar(&f.ipc, "ipc", "", "with --build-image: the static linux ipc binary, with ipc-relay beside it (default: linux-<arch>/ipc beside carapace, as make build puts them)")
	fl.BoolVar(&f.llmKeyStdin, "llm-key-stdin", false, "read the model API key (or, with --oauth, a Claude OAuth token) from stdin")
	fl.StringVar(&f.llmProvider, "llm-provider", "", "set llm.provider: "+strings.Join(llmproxy.ProviderNames(), ", ")+" (setup looks for a running Ollama at $OLLAMA_HOST or 127.0.0.1:11434)")
	fl.StringVar(&f.llmUpstream, "llm-upstream", "", "set llm.upstream: the model API's URL (https, or http on loopback)")
	fl.StringVar(&f.llmAuth, "llm-auth", "", "set llm.auth: how a custom upstream takes its key: "+strings.Join(llmproxy.AuthStyles, ", "))
	fl.StringVar(&f.llmModel, "llm-model", "", "set llm.model: the model the agents ask for (a local model needs one)")
	fl.BoolVar(&f.oauth, "oauth", false, "the key is a Claude subscription's OAuth token (sk-ant-oat… is recognised without it)")
	fl.BoolVar(&f.telegramStdin, "telegram-token-stdin", false, "read a Telegram bot token from stdin and turn the Telegram channel on")
	fl.BoolVar(&f.telegramPair, "telegram-pair", false, "print a one-time code that makes you the bot's owner")
	fl.StringVar(&f.calendar.url, "calendar-url", "", "set up the calendar plugin: its CalDAV server's URL (https, or http to this machine)")
	fl.StringVar(&f.calendar.user, "calendar-user", "", "the CalDAV user name")
	fl.StringVar(&f.calendar.zone, "calendar-zone", "", "your IANA time zone for the calendar, e.g. Europe/Paris (default: this machine's)")
	fl.BoolVar(&f.calendar.passwordStdin, "calendar-password-stdin", false, "read the CalDAV password (an app-specific password for iCloud or Fastmail) from stdin")
	f.mail.register(fl)
	fl.BoolVar(&f.service, "service", false, "install the background service (carapace service install)")
	c.RegisterFlagCompletionFunc("engine", cobra.FixedCompletions(config.Engines, cobra.ShellCompDirectiveNoFileComp))
	c.MarkFlagsMutuallyExclusive("image", "build-image")
	c.MarkFlagsMutuallyExclusive("llm-key-stdin", "telegram-token-stdin", "calendar-password-stdin", "mail-password-stdin")
	return c
}

// Statuses of a setup step.
const (
	stepOK   = "ok"   // already so; nothing changed
	stepDone = "done" // changed now
	stepSkip = "skip" // left as it is
	stepWarn = "warn" // left undone: the fix says how
	stepFail = "fail" // failed: the fix says how
)

// setupRun is one run of `carapace setup`.
type setupRun struct {
	a     *app
	f     setupFlags
	ctx   context.Context
	out   io.Writer
	in    io.Reader
	ask   *prompter // nil: never ask
	h     home.Dir
	cfg   *config.Config
	fails int
	warns int
	// changed: config.toml was changed, which a running core applies
	// only when it restarts.
	changed bool
}

func (a *app) setup(cmd *cobra.Command, f setupFlags) error {
	if f.engine != "" && !slices.Contains(config.Engines, f.engine) {
		return usagef("--engine %q: use one of %s", f.engine, strings.Join(config.Engines, ", "))
	}
	if f.ipc != "" && !f.buildImage {
		return usagef("--ipc goes with --build-image")
	}
	if f.oauth && !f.llmKeyStdin && f.yes {
		return usagef("--oauth goes with --llm-key-stdin")
	}
	tty := terminal(cmd.InOrStdin())
	if !f.yes && !tty {
		return usagef("stdin is not a terminal, so setup cannot ask: run carapace setup --yes with the flags for what to set")
	}
	h, err := a.home()
	if err != nil {
		return err
	}
	s := &setupRun{a: a, f: f, ctx: cmd.Context(), out: cmd.OutOrStdout(), in: cmd.InOrStdin(), h: h}
	if !f.yes {
		s.ask = newPrompter(cmd.InOrStdin().(*os.File), s.out)
	}
	fmt.Fprintf(s.out, "Setting up Carapace %s in %s\n\n", a.cfg.Version, h)
	if err := s.home(); err != nil {
		return err
	}
	if err := s.config(); err != nil {
		return err
	}
	eng, engOK := s.engine()
	if engOK {
		s.image(eng)
	} else {
		s.report(stepSkip, "image", "no container engine to check it with", "")
	}
	s.modelKey()
	s.telegram()
	s.calendar()
	s.mail()
	s.service()
	fmt.Fprintln(s.out)
	if s.changed {
		if data, err := os.ReadFile(h.Config()); err == nil {
			tellCore(s.ctx, s.out, control.NewClient(h.ControlSocket()), data)
		}
	}
	switch {
	case s.fails > 0:
		fmt.Fprintf(s.out, "%d step(s) failed: run the fixes above, then carapace setup again.\n", s.fails)
		return exitCode(1)
	case s.warns > 0:
		fmt.Fprintf(s.out, "Set up, with %d thing(s) left to do (above). carapace doctor checks everything.\n", s.warns)
	default:
		fmt.Fprintln(s.out, "Set up. carapace doctor checks everything.")
	}
	return nil
}

// report prints one step's outcome and, for a warning or a failure, the
// command that fixes it.
func (s *setupRun) report(status, step, msg, fix string) {
	switch status {
	case stepFail:
		s.fails++
	case stepWarn:
		s.warns++
	}
	fmt.Fprintf(s.out, "%-4s  %-10s %s\n", status, step, printable(msg))
	if fix != "" {
		fmt.Fprintf(s.out, "      %-10s fix: %s\n", "", printable(fix))
	}
}

// home creates the home.
func (s *setupRun) home() error {
	_, err := os.Stat(string(s.h))
	existed := err == nil
	if err := s.h.Ensure(); err != nil {
		return fmt.Errorf("create the home: %w", err)
	}
	if existed {
		s.report(stepOK, "home", string(s.h), "")
	} else {
		s.report(stepDone, "home", string(s.h)+" (created)", "")
	}
	return nil
}

// config writes config.toml if there is none, checks it, and sets
// --engine.
func (s *setupRun) config() error {
	path := s.h.Config()
	_, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := atomicfile.Write(path, config.Template(s.a.cfg.Version), 0o600); err != nil {
			return fmt.Errorf("write config.toml: %w", err)
		}
		s.report(stepDone, "config", path+" (written, every setting commented out at its default)", "")
	case err != nil:
		return fmt.Errorf("read config.toml: %w", err)
	default:
		probs, err := configProblems(path)
		if err != nil {
			return err
		}
		if len(probs) > 0 {
			s.report(stepFail, "config", "config.toml would not load: "+strings.Join(probs, "; "), "carapace config edit")
			return exitCode(1)
		}
		s.report(stepOK, "config", path, "")
	}
	if err := s.loadConfig(); err != nil {
		return err
	}
	if s.f.engine != "" {
		if err := s.set("engine", "runtime.engine", s.f.engine); err != nil {
			return err
		}
	}
	return nil
}

func (s *setupRun) loadConfig() error {
	cfg, err := config.Load(s.h.Config())
	if err != nil {
		return err
	}
	s.cfg = cfg
	return nil
}

// set sets key in config.toml to value (a string) unless it already has
// it, and reports it under step.
func (s *setupRun) set(step, key, value string) error {
	return s.setTOML(step, key, config.Quote(value))
}

// setTOML sets key to value, a TOML value.
func (s *setupRun) setTOML(step, key, value string) error {
	if cur, err := s.cfg.Get(key); err == nil && cur == value {
		return nil
	}
	path := s.h.Config()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := config.Set(data, key, value)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, out, 0o600); err != nil {
		return fmt.Errorf("write config.toml: %w", err)
	}
	s.report(stepDone, step, "config.toml: "+key+" = "+value, "")
	s.changed = true
	return s.loadConfig()
}

// engine checks the container engine config.toml chooses.
func (s *setupRun) engine() (readyEngine, bool) {
	e, fix, err := s.a.findEngine(s.ctx, s.cfg.Runtime.Engine)
	if err != nil {
		status := stepFail
		if s.cfg.Runtime.Engine == "none" {
			status = stepWarn // chosen: plugin development
		}
		s.report(status, "engine", oneLine(err.Error()), fix)
		return e, false
	}
	msg := e.info.Engine + " " + e.info.Version
	if s.cfg.Runtime.Engine == "auto" {
		msg += " (runtime.engine = \"auto\")"
	}
	s.report(stepOK, "engine", msg, "")
	return e, true
}

// image checks, selects or builds the agent image.
func (s *setupRun) image(e readyEngine) {
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	if s.f.image != "" {
		ok, err := agentimage.Exists(ctx, e.bin(), s.f.image)
		switch {
		case err != nil:
			s.report(stepFail, "image", oneLine(err.Error()), "")
		case !ok:
			s.report(stepFail, "image", s.f.image+" is not in "+e.name+"'s images", e.bin()+" pull "+shellQuote(s.f.image)+" (or build it), then carapace setup --image "+shellQuote(s.f.image))
		default:
			if err := s.set("image", "runtime.image", s.f.image); err != nil {
				s.report(stepFail, "image", err.Error(), "")
				return
			}
			s.report(stepOK, "image", s.f.image, "")
		}
		return
	}
	ref := s.a.defaultImage(s.cfg.Runtime.Image)
	if s.f.buildImage {
		s.build(e)
		return
	}
	ok, err := agentimage.Exists(ctx, e.bin(), ref)
	if err != nil {
		s.report(stepFail, "image", oneLine(err.Error()), "")
		return
	}
	if ok {
		s.report(stepOK, "image", ref, "")
		return
	}
	fix := imageFix
	if s.ask == nil {
		s.report(stepWarn, "image", "the agent image "+ref+" is missing: agents cannot start", fix)
		return
	}
	fmt.Fprintf(s.out, "\nThe agent image %s is missing. Building it needs the network: %s.\n", ref, agentimage.Registry)
	answer, err := s.ask.line("Build it now [b], name an image you have, or press Enter to skip: ")
	switch {
	case err != nil:
		s.report(stepWarn, "image", "no answer: "+err.Error(), fix)
	case answer == "":
		s.report(stepWarn, "image", "the agent image "+ref+" is missing: agents cannot start", fix)
	case answer == "b" || answer == "B":
		s.build(e)
	default:
		s.f.image = answer
		s.image(e)
	}
}

// build builds the agent image with the engine's output as progress.
func (s *setupRun) build(e readyEngine) {
	ref := runtime.Image(s.a.cfg.Version)
	arch, err := agentimage.EngineArch(s.ctx, e.bin())
	if err != nil {
		s.report(stepFail, "image", oneLine(err.Error()), "")
		return
	}
	ipc, relay, err := staticIPC(s.f.ipc, arch)
	if err != nil {
		s.report(stepFail, "image", oneLine(err.Error()), "carapace setup --build-image --ipc PATH")
		return
	}
	fmt.Fprintf(s.out, "      %-10s building %s with %s (%s)\n", "", ref, e.name, agentimage.Registry)
	start := time.Now()
	progress := &prefixWriter{w: s.out, prefix: "      │ "}
	err = agentimage.BuildAgent(s.ctx, agentimage.Options{Engine: e.bin(), Tag: ref, IPC: ipc, Relay: relay, Version: s.a.cfg.Version, Progress: progress})
	progress.Flush()
	if err != nil {
		s.report(stepFail, "image", "the build failed (the engine's output is above): "+oneLine(firstLine(err.Error())), "check the network (a registry and npm), then carapace setup --build-image; or carapace setup --image IMAGE")
		return
	}
	if s.cfg.Runtime.Image != "" && s.cfg.Runtime.Image != ref {
		if err := s.set("image", "runtime.image", ref); err != nil {
			s.report(stepFail, "image", err.Error(), "")
			return
		}
	}
	s.report(stepDone, "image", fmt.Sprintf("%s built in %s", ref, time.Since(start).Round(time.Second)), "")
}

// modelKey stores the model API's credential.
func (s *setupRun) modelKey() {
	store, err := s.a.credentials()
	if err != nil {
		s.report(stepFail, "model key", err.Error(), "")
		return
	}
	anthropicStored, _ := llmproxy.FromStore(store)(s.ctx)
	s.modelAPI(anthropicStored.Kind != "")
	up := s.cfg.LLM.DefaultUpstream()
	if up.Provider != llmproxy.ProviderAnthropic || up.Auth != "" {
		s.providerKey(store, up)
		return
	}
	stored, serr := llmproxy.FromStore(store)(s.ctx)
	if serr != nil && !errors.Is(serr, llmproxy.ErrNoCredential) {
		s.report(stepFail, "model key", "unreadable: "+oneLine(serr.Error()), "carapace auth set --llm anthropic")
		return
	}
	var secret []byte
	switch {
	case s.f.llmKeyStdin:
		secret, err = s.secret("Anthropic API key or Claude OAuth token")
	case stored.Kind != "":
		s.report(stepOK, "model key", "stored ("+stored.Kind+"; carapace auth set --llm anthropic replaces it)", "")
		return
	case s.ask != nil:
		fmt.Fprintln(s.out, "\nAgents reach the model through the core, which adds your key on the host: it never enters a container.")
		secret, err = s.ask.secret("Anthropic API key or Claude OAuth token (input hidden; Enter to skip): ")
	}
	if err != nil {
		s.report(stepFail, "model key", err.Error(), "carapace auth set --llm anthropic")
		return
	}
	defer clear(secret)
	if len(secret) == 0 {
		s.report(stepWarn, "model key", "no model API credential: agents cannot reach the model", "carapace auth set --llm anthropic")
		return
	}
	oauth := s.f.oauth || bytes.HasPrefix(secret, []byte("sk-ant-oat"))
	kind := llmproxy.KindAPIKey
	if oauth {
		kind = llmproxy.KindOAuth
	}
	if err := (llmproxy.Credential{Kind: kind, Secret: string(secret)}).Check(); err != nil {
		s.report(stepFail, "model key", "that is not a key ("+err.Error()+"; a paste that took more than the key?): nothing stored",
			"carapace auth set --llm anthropic")
		return
	}
	key, _ := keychain.LLMKey("anthropic", oauth)
	if err := store.Set(keychain.LLMPlugin, key, secret); err != nil {
		s.report(stepFail, "model key", err.Error(), "")
		return
	}
	s.report(stepDone, "model key", fmt.Sprintf("stored (%s, %d bytes)", key, len(secret)), "")
}

// secret reads one secret: hidden at the terminal, or all of stdin.
func (s *setupRun) secret(what string) ([]byte, error) {
	ask := s.ask
	if ask == nil && terminal(s.in) { // --yes, and the secret typed
		ask = newPrompter(s.in.(*os.File), s.out)
	}
	if ask != nil {
		return ask.secret(what + " (input hidden): ")
	}
	b, err := readPipedSecret(s.in)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, errors.New("stdin was empty: pipe the secret in, e.g. printf %s \"$KEY\" | carapace setup --yes --llm-key-stdin")
	}
	return b, nil
}

// telegram stores a bot token, turns the channel on and pairs.
func (s *setupRun) telegram() {
	store, err := s.a.credentials()
	if err != nil {
		s.report(stepFail, "telegram", err.Error(), "")
		return
	}
	b, gerr := store.Get("telegram", telegramTokenKey)
	stored := gerr == nil
	clear(b)
	var token []byte
	switch {
	case s.f.telegramStdin:
		token, err = s.secret("Telegram bot token")
	case stored:
	case s.ask != nil:
		fmt.Fprintln(s.out, "\nTelegram lets you talk to your agent and approve its requests from your phone.")
		fmt.Fprintln(s.out, "Create a bot with @BotFather (/newbot) and paste its token, or press Enter to skip.")
		token, err = s.ask.secret("Telegram bot token (input hidden): ")
	}
	if err != nil {
		s.report(stepFail, "telegram", err.Error(), "carapace auth set --plugin telegram --key "+telegramTokenKey)
		return
	}
	defer clear(token)
	if !stored && len(token) == 0 {
		s.report(stepSkip, "telegram", "not set up (docs/TELEGRAM.md; carapace setup --telegram-token-stdin)", "")
		return
	}
	if len(token) > 0 {
		if err := store.Set("telegram", telegramTokenKey, token); err != nil {
			s.report(stepFail, "telegram", err.Error(), "")
			return
		}
		s.report(stepDone, "telegram", fmt.Sprintf("bot token stored (%d bytes)", len(token)), "")
	} else {
		s.report(stepOK, "telegram", "bot token stored", "")
	}
	// The channel on: approvals on the phone, and a group its messages
	// start sessions in.
	if err := s.setTOML("telegram", "plugins.telegram.surface", "true"); err != nil {
		s.report(stepFail, "telegram", err.Error(), "carapace config edit")
		return
	}
	if _, ok := s.cfg.Groups["main"]; !ok {
		// Topics are dot-separated [a-z0-9_] words: nothing to escape.
		topics := `["` + strings.Join(config.SpawnTopics, `", "`) + `"]`
		if err := s.setTOML("telegram", "groups.main.topics", topics); err != nil {
			s.report(stepFail, "telegram", err.Error(), "carapace config edit")
			return
		}
	}
	pair := s.f.telegramPair
	if !pair && s.ask != nil && len(token) > 0 {
		pair, err = s.ask.yes("Pair your Telegram account now (a code to send the bot)?", true)
		if err != nil {
			pair = false
		}
	}
	if owner, _, err := telegramOwner(s.ctx, s.h); pair && err == nil && owner != 0 {
		s.restartTelegram()
		s.report(stepSkip, "telegram", fmt.Sprintf("already owned by Telegram user %d: no new pairing", owner), "carapace telegram pair --replace (to hand the bot to another account)")
		return
	}
	if pair {
		fmt.Fprintln(s.out)
		if err := s.a.pairTelegram(s.ctx, s.out, false); err != nil {
			s.report(stepFail, "telegram", "pairing: "+err.Error(), "carapace telegram pair")
			return
		}
		s.report(stepDone, "telegram", "pairing code written: send it to the bot within 10 minutes", "")
	} else if len(token) > 0 {
		s.restartTelegram()
		s.report(stepWarn, "telegram", "not paired: the bot answers no one until you pair (or set owner_id)", "carapace telegram pair")
	}
}

// restartTelegram has a running core's Telegram plugin read the new
// token (pairTelegram does the same for a pairing).
func (s *setupRun) restartTelegram() {
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	c := control.NewClient(s.h.ControlSocket())
	st, err := c.RestartPlugin(ctx, "telegram")
	switch {
	case errors.Is(err, control.ErrNotRunning):
	case err != nil:
		s.report(stepWarn, "telegram", "the running core did not restart its Telegram plugin: "+oneLine(err.Error()), "carapace plugin restart telegram")
	case !st.Healthy:
		s.report(stepWarn, "telegram", "the running core's Telegram plugin did not start with the token: "+st.Problem, "carapace plugin restart telegram")
	default:
		s.report(stepDone, "telegram", "the running core's Telegram plugin restarted with the token", "")
	}
}

// service installs the background service.
func (s *setupRun) service() {
	svc, err := s.a.service()
	if err != nil {
		s.report(stepSkip, "service", oneLine(err.Error()), "")
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	st, err := svc.Status(ctx)
	if err == nil && st.Installed && st.Current {
		s.report(stepOK, "service", svc.File()+" ("+st.Detail+")", "")
		return
	}
	install := s.f.service
	if !install && s.ask != nil {
		what := "a systemd user service"
		if goruntime.GOOS == "darwin" {
			what = "a LaunchAgent (the menu-bar app's Open at Login does the same)"
		}
		fmt.Fprintln(s.out)
		install, err = s.ask.yes("Start the core in the background at login, as "+what+"?", false)
		if err != nil {
			install = false
		}
	}
	if !install {
		msg := "not installed: start the core with carapace serve, or install the service"
		if err == nil && st.Installed {
			msg = "installed, but not what this carapace would install (another binary or home)"
		}
		s.report(stepSkip, "service", msg, "")
		return
	}
	if err := svc.Install(ctx); err != nil {
		s.report(stepFail, "service", oneLine(err.Error()), "carapace service install")
		return
	}
	s.report(stepDone, "service", "installed "+svc.File()+" and started it; logs: "+svc.Logs(), "")
}

// terminal reports whether r is a terminal.
func terminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// prompter asks questions at a terminal. It reads the terminal without a
// buffer of its own, so that what is typed ahead of a hidden prompt is
// read by that prompt and not kept back by an earlier one.
type prompter struct {
	f   *os.File
	out io.Writer
}

func newPrompter(f *os.File, out io.Writer) *prompter {
	return &prompter{f: f, out: out}
}

// maxAnswer bounds an answer's length.
const maxAnswer = 4096

// line asks a question and returns the answer, trimmed.
func (p *prompter) line(q string) (string, error) {
	fmt.Fprint(p.out, q)
	var l []byte
	b := make([]byte, 1)
	for len(l) < maxAnswer {
		n, err := p.f.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			l = append(l, b[0])
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(l) > 0 {
				break
			}
			fmt.Fprintln(p.out)
			return "", err
		}
	}
	return strings.TrimSpace(string(l)), nil
}

// yes asks a yes/no question; Enter takes def.
func (p *prompter) yes(q string, def bool) (bool, error) {
	hint := " [y/N] "
	if def {
		hint = " [Y/n] "
	}
	for {
		a, err := p.line(q + hint)
		if err != nil {
			return false, err
		}
		switch strings.ToLower(a) {
		case "":
			return def, nil
		case "y", "yes":
			return true, nil
		case "n", "no":
			return false, nil
		}
		fmt.Fprintln(p.out, "Please answer y or n.")
	}
}

// secret asks for a secret without echoing it; the trailing newline is
// not part of it, nor are spaces around a pasted token.
func (p *prompter) secret(q string) ([]byte, error) {
	fmt.Fprint(p.out, q)
	b, err := readHidden(p.f)
	fmt.Fprintln(p.out)
	if err != nil {
		return nil, fmt.Errorf("read from the terminal: %w", err)
	}
	t := bytes.TrimSpace(b)
	out := bytes.Clone(t)
	clear(b)
	if len(out) > keychain.MaxValueSize {
		clear(out)
		return nil, errTooLarge
	}
	return out, nil
}

// prefixWriter writes each line with a prefix: a build's output, indented
// under its step.
type prefixWriter struct {
	w      io.Writer
	prefix string
	part   []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.part = append(p.part, b...)
	for {
		i := bytes.IndexAny(p.part, "\r\n")
		if i < 0 {
			break
		}
		if line := strings.TrimRight(string(p.part[:i]), " "); line != "" {
			fmt.Fprintf(p.w, "%s%s\n", p.prefix, printable(line))
		}
		p.part = p.part[i+1:]
	}
	return len(b), nil
}

// Flush writes a last line without a newline.
func (p *prefixWriter) Flush() {
	if len(p.part) > 0 {
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, printable(string(p.part)))
		p.part = nil
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// readHidden reads a line from the terminal f without echoing it. An
// interrupt while it waits (Ctrl-C) restores the terminal's echo before
// the process exits with status 130, as a shell's interrupted command
// does: term.ReadPassword alone would leave the terminal without echo.
func readHidden(f *os.File) ([]byte, error) {
	fd := int(f.Fd())
	old, err := term.GetState(fd)
	if err != nil {
		return nil, err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-sig:
			_ = term.Restore(fd, old)
			fmt.Fprintln(os.Stderr)
			os.Exit(130)
		case <-done:
		}
	}()
	return term.ReadPassword(fd)
}
