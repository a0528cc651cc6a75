package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/carapace-dev/carapace/keychain"
)

// mask stands for a credential's value wherever one is listed: never a
// character of the value, whatever its length.
const mask = "••••••"

// pipeHint shows how to hand a secret to `auth set`.
const pipeHint = `printf %s "$TOKEN" | carapace auth set --plugin NAME --key KEY`

// setHint is pipeHint for a credential's names, where they are valid.
func setHint(plugin, key string) string {
	if keychain.CheckPlugin(plugin) != nil {
		plugin = "NAME"
	}
	if keychain.CheckKey(key) != nil {
		key = "KEY"
	}
	return `printf %s "$TOKEN" | carapace auth set --plugin ` + plugin + " --key " + key
}

// authCmd groups the credential commands.
func (a *app) authCmd() *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:   "auth",
		Short: "Store, list and delete plugin credentials",
		Long: `Plugins' credentials (API tokens, passwords, keys) stay on the host and never
enter the agent's container. Each is named by its plugin and a key; a
plugin's handler can read only its own (plugin.Services.ReadCredential).

On macOS they live in the login Keychain (service dev.carapace.credentials);
elsewhere in $CARAPACE_HOME/credentials, one file per credential, mode 0600.

Secrets are read from stdin or typed at a hidden prompt, never taken from
the command line (where ps and your shell history would keep them), and
never printed: carapace auth status shows their length only.`,
		Example: `  printf %s "$GITHUB_TOKEN" | carapace auth set --plugin github --key token
  carapace auth set --plugin telegram --key bot_token
  carapace auth status
  carapace auth delete --plugin github --key token`,
	})
	c.AddCommand(a.authSetCmd(), a.authStatusCmd(), a.authDeleteCmd())
	return c
}

// credentials returns the home's credential store.
func (a *app) credentials() (keychain.Store, error) {
	h, err := a.home()
	if err != nil {
		return nil, err
	}
	return keychain.Default(h.CredentialsDir()), nil
}

// credentialFlags adds --plugin and --key (with completion) to c.
func (a *app) credentialFlags(c *cobra.Command, plugin, key *string) {
	c.Flags().StringVar(plugin, "plugin", "", "the plugin the credential belongs to (kebab-case, e.g. github)")
	c.Flags().StringVar(key, "key", "", "the credential's name within the plugin (e.g. token)")
	c.RegisterFlagCompletionFunc("plugin", a.completeCredentialPlugins)
	c.RegisterFlagCompletionFunc("key", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		s, err := a.credentials()
		if err != nil || *plugin == "" {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		keys, _ := s.List(*plugin)
		return keys, cobra.ShellCompDirectiveNoFileComp
	})
}

// completeCredentialPlugins completes --plugin with the plugins that have
// credentials.
func (a *app) completeCredentialPlugins(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	s, err := a.credentials()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	plugins, _ := s.Plugins()
	return plugins, cobra.ShellCompDirectiveNoFileComp
}

// checkCredentialNames validates --plugin and --key before anything is
// read or stored: a bad or missing one is a usage error.
func checkCredentialNames(plugin, key string) error {
	switch {
	case plugin == "":
		return usagef("--plugin is required")
	case key == "":
		return usagef("--key is required")
	}
	if err := keychain.CheckPlugin(plugin); err != nil {
		return &usageError{err: fmt.Errorf("--plugin: %w", err)}
	}
	if err := keychain.CheckKey(key); err != nil {
		return &usageError{err: fmt.Errorf("--key: %w", err)}
	}
	return nil
}

func (a *app) authSetCmd() *cobra.Command {
	var plugin, key, llm string
	var oauth bool
	c := &cobra.Command{
		Use:   "set (--plugin NAME --key KEY | --llm PROVIDER [--oauth])",
		Short: "Store a credential read from stdin",
		Long: `Store a credential for a plugin, replacing any previous value.

The secret is read from stdin, never from the command line: pipe it in, or
run the command in a terminal and type or paste it at the prompt (nothing
is echoed). From a pipe or file, one trailing newline ("\n" or "\r\n") is
removed, so echo works as well as printf; anything else is kept as is.
Secrets are at most 64 KiB and may not be empty.

Plugin names are kebab-case (github, google-calendar). Keys are 1-128
characters of A-Z, a-z, 0-9, '.', '_' and '-'.

--llm anthropic stores the model API's key, which the core's proxy adds to
the agent's model requests (the container only ever holds a placeholder);
with --oauth, a Claude subscription's OAuth token instead. No plugin can
read it. --llm custom (or ollama, llamacpp) stores the key or token of
that provider's upstream, sent in the style config.toml's auth names
(x-api-key or bearer); a local Ollama or llama-server takes none.`,
		Example: `  printf %s "$ANTHROPIC_API_KEY" | carapace auth set --llm anthropic
  carapace auth set --llm anthropic --oauth                # prompts; input hidden
  printf %s "$GATEWAY_TOKEN" | carapace auth set --llm custom
  printf %s "$TOKEN" | carapace auth set --plugin github --key token
  carapace auth set --plugin telegram --key bot_token     # prompts; input hidden
  carapace auth set --plugin gmail --key client.json < client_secret.json`,
		// The arguments may be the secret itself: refuse them without
		// repeating them.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("auth set takes no arguments (not shown): never put a secret on the command line; pipe it on stdin, e.g. %s", setHint(plugin, key))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := llmNames(&plugin, &key, llm, oauth); err != nil {
				return err
			}
			if err := checkCredentialNames(plugin, key); err != nil {
				return err
			}
			s, err := a.credentials()
			if err != nil {
				return err
			}
			secret, err := readSecret(cmd, plugin, key)
			if err != nil {
				return err
			}
			defer clear(secret)
			if err := s.Set(plugin, key, secret); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stored %s for plugin %s (%d bytes)\n", key, plugin, len(secret))
			return nil
		},
	}
	a.credentialFlags(c, &plugin, &key)
	c.Flags().StringVar(&llm, "llm", "", "store the model API's credential instead: "+strings.Join(keychain.LLMProviders, ", "))
	c.Flags().BoolVar(&oauth, "oauth", false, "with --llm: a Claude subscription's OAuth token instead of an API key")
	// A mistyped flag could be a secret starting with '-': name a long
	// flag the user typed, but never echo a whole argument.
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		msg := err.Error()
		if strings.HasPrefix(msg, "unknown flag: --") || strings.HasPrefix(msg, "flag needs an argument: --") {
			return err
		}
		return fmt.Errorf("bad flag or argument (not shown): secrets are read from stdin, never from the command line, e.g. %s", pipeHint)
	})
	return c
}

// errTooLarge refuses a secret over keychain.MaxValueSize.
var errTooLarge = fmt.Errorf("the secret is larger than the limit of %d bytes (64 KiB)", keychain.MaxValueSize)

// readSecret reads a secret: at a hidden prompt on stderr when stdin is a
// terminal, else all of stdin less one trailing newline.
func readSecret(cmd *cobra.Command, plugin, key string) ([]byte, error) {
	in := cmd.InOrStdin()
	var secret []byte
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(cmd.ErrOrStderr(), "Secret for %s %s (input is hidden): ", plugin, key)
		b, err := readHidden(f)
		fmt.Fprintln(cmd.ErrOrStderr())
		if err != nil {
			return nil, fmt.Errorf("read the secret from the terminal: %w", err)
		}
		secret = b
	} else {
		b, err := readPipedSecret(in)
		if err != nil {
			return nil, err
		}
		secret = b
	}
	switch {
	case len(secret) > keychain.MaxValueSize:
		clear(secret)
		return nil, errTooLarge
	case len(secret) == 0:
		return nil, errors.New("empty secret: nothing to store (pipe it on stdin, e.g. " + setHint(plugin, key) + ")")
	}
	return secret, nil
}

// readPipedSecret reads a secret from a pipe or file: all of it, less one
// trailing newline ("\n" or "\r\n", as a shell's echo or a file's last
// line adds). It refuses one over keychain.MaxValueSize.
func readPipedSecret(in io.Reader) ([]byte, error) {
	// Room for the largest secret, a "\r\n" and one byte more: a longer
	// input is cut there and stays too large once stripped, so a cut
	// never passes for a secret that ended in a newline.
	secret, err := io.ReadAll(io.LimitReader(in, keychain.MaxValueSize+3))
	if err != nil {
		clear(secret)
		return nil, fmt.Errorf("read the secret from stdin: %w", err)
	}
	if bytes.HasSuffix(secret, []byte("\r\n")) {
		secret = secret[:len(secret)-2]
	} else if bytes.HasSuffix(secret, []byte("\n")) {
		secret = secret[:len(secret)-1]
	}
	if len(secret) > keychain.MaxValueSize {
		clear(secret)
		return nil, errTooLarge
	}
	return secret, nil
}

// credentialStatus is one credential as `auth status` shows it: its
// length, never its value.
type credentialStatus struct {
	Plugin string `json:"plugin"`
	Key    string `json:"key"`
	Bytes  int    `json:"bytes,omitempty"`
	Error  string `json:"error,omitempty"` // why it could not be read
}

func (a *app) authStatusCmd() *cobra.Command {
	var plugin string
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "List the stored credentials, masked",
		Long: `List the stored credentials of every plugin, or of one with --plugin: plugin,
key and the value's length. No character of a value is ever shown.

A credential the store refuses to read (in the file store: a file with a
loose mode, of another user, or reached through a symbolic link) is listed
with the reason and the fix, and the command exits with status 1.`,
		Example: `  carapace auth status
  carapace auth status --plugin github
  carapace auth status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if plugin != "" {
				if err := keychain.CheckPlugin(plugin); err != nil {
					return &usageError{err: fmt.Errorf("--plugin: %w", err)}
				}
			}
			s, err := a.credentials()
			if err != nil {
				return err
			}
			list, err := credentialList(s, plugin)
			if err != nil {
				return err
			}
			where := "the credential store"
			if st, ok := s.(fmt.Stringer); ok {
				where = st.String()
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if list == nil {
					list = []credentialStatus{}
				}
				if err := writeJSON(out, struct {
					Store       string             `json:"store"`
					Credentials []credentialStatus `json:"credentials"`
				}{where, list}); err != nil {
					return err
				}
			} else if err := printCredentials(out, where, plugin, list); err != nil {
				return err
			}
			failed := 0
			for _, c := range list {
				if c.Error != "" {
					failed++
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d credential(s) could not be read; see above", failed)
			}
			return nil
		},
	}
	c.Flags().StringVar(&plugin, "plugin", "", "list only this plugin's credentials")
	c.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON (lengths only, never values)")
	c.RegisterFlagCompletionFunc("plugin", a.completeCredentialPlugins)
	return c
}

// credentialList reads the store's credentials (of one plugin if plugin
// is set) and keeps only their lengths.
func credentialList(s keychain.Store, plugin string) ([]credentialStatus, error) {
	plugins := []string{plugin}
	if plugin == "" {
		var err error
		if plugins, err = s.Plugins(); err != nil {
			return nil, err
		}
	}
	var list []credentialStatus
	for _, p := range plugins {
		keys, err := s.List(p)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			c := credentialStatus{Plugin: p, Key: k}
			v, err := s.Get(p, k)
			if err != nil {
				c.Error = err.Error()
			}
			c.Bytes = len(v)
			clear(v)
			list = append(list, c)
		}
	}
	return list, nil
}

// printCredentials prints the list as a table.
func printCredentials(out io.Writer, where, plugin string, list []credentialStatus) error {
	if len(list) == 0 {
		if plugin != "" {
			fmt.Fprintf(out, "no credentials stored for plugin %s (in %s); add one with:\n  %s\n",
				plugin, where, setHint(plugin, "KEY"))
			return nil
		}
		fmt.Fprintf(out, "no credentials stored (in %s); add one with:\n  %s\n", where, pipeHint)
		return nil
	}
	fmt.Fprintf(out, "credentials in %s\n\n", where)
	tw := table(out)
	fmt.Fprintln(tw, "PLUGIN\tKEY\tVALUE")
	for _, c := range list {
		value := fmt.Sprintf("%s (%d bytes)", mask, c.Bytes)
		if c.Error != "" {
			value = "unreadable: " + printable(c.Error)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Plugin, c.Key, value)
	}
	return tw.Flush()
}

func (a *app) authDeleteCmd() *cobra.Command {
	var plugin, key, llm string
	var oauth bool
	c := &cobra.Command{
		Use:   "delete (--plugin NAME --key KEY | --llm anthropic [--oauth])",
		Short: "Delete a stored credential",
		Long: `Delete one of a plugin's credentials. Deleting a credential that is not
stored is an error (exit status 1).`,
		Example: `  carapace auth delete --plugin github --key token
  carapace auth delete --llm anthropic`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := llmNames(&plugin, &key, llm, oauth); err != nil {
				return err
			}
			if err := checkCredentialNames(plugin, key); err != nil {
				return err
			}
			s, err := a.credentials()
			if err != nil {
				return err
			}
			if err := s.Delete(plugin, key); err != nil {
				if errors.Is(err, keychain.ErrNotFound) {
					return fmt.Errorf("no credential %s stored for plugin %s (see carapace auth status --plugin %s): %w",
						key, plugin, plugin, keychain.ErrNotFound)
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s for plugin %s\n", key, plugin)
			return nil
		},
	}
	a.credentialFlags(c, &plugin, &key)
	c.Flags().StringVar(&llm, "llm", "", "delete the model API's credential instead: anthropic")
	c.Flags().BoolVar(&oauth, "oauth", false, "with --llm: the OAuth token instead of the API key")
	return c
}

// llmNames turns --llm (and --oauth) into the credential's plugin and key,
// refusing a mix with --plugin or --key.
func llmNames(plugin, key *string, llm string, oauth bool) error {
	if llm == "" {
		if oauth {
			return usagef("--oauth goes with --llm anthropic")
		}
		return nil
	}
	if *plugin != "" || *key != "" {
		return usagef("give --llm, or --plugin and --key, not both")
	}
	k, err := keychain.LLMKey(llm, oauth)
	if err != nil {
		return &usageError{err: err}
	}
	*plugin, *key = keychain.LLMPlugin, k
	return nil
}
