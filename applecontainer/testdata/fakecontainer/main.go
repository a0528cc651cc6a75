// Command fakecontainer stands in for Apple's `container` CLI in the tests
// of package applecontainer, on machines that are not Macs. It appends its
// argv to a log and replays the outputs recorded for a version under
// testdata/versions/<version>/ (see testdata/README.md).
//
// Environment, from the process or from fake.env (a JSON object) next to
// the path it was run by:
//
//	FAKE_CONTAINER_LOG      file its argv is appended to, one JSON array per line (required)
//	FAKE_CONTAINER_VERSION  the version directory to replay, e.g. 1.2.2 (required)
//	FAKE_CONTAINER_DATA     the versions directory (required)
//	FAKE_CONTAINER_STATE    directory of the containers it pretends to run (default: the log's directory)
//	FAKE_CONTAINER_APP_ROOT the appRoot `system status` reports (default: the version's appRoot/ folder, if it has one)
//
// For `run`:
//
//	FAKE_CONTAINER_RUN_STDOUT, FAKE_CONTAINER_RUN_STDERR  what the container prints
//	FAKE_CONTAINER_RUN_STDOUT_REPEAT  how many times it prints FAKE_CONTAINER_RUN_STDOUT (default 1)
//	FAKE_CONTAINER_RUN_EXIT         the container's exit status (default 0)
//	FAKE_CONTAINER_RUN_SLEEP        how long the container runs (a Go duration) unless stopped
//	FAKE_CONTAINER_RUN_IGNORE_STOP  1: `container stop` does not end it
//	FAKE_CONTAINER_RUN_SELFKILL     1: the CLI dies of SIGKILL, leaving its container
//
// The appRoot in the recorded `system status` (a Mac's path) is replaced
// by FAKE_CONTAINER_APP_ROOT or, without it, by the version's own appRoot/
// folder when there is one, so that what the engine finds there (the
// kernels/ folder) is the test's.
//
// The replayed command is named by its subcommands joined with '-', e.g.
// "system-status", "list", and "version" for --version; its stdout is
// <name>.json when --format json is given and <name>.out otherwise, its
// stderr <name>.err, its exit status <name>.exit (default 0).
//
// `run`, `stop` and `delete` replay run.err, stop.err, delete.err when
// there is one (the services are down). Otherwise they keep state: a
// container exists while a file of its name is in the state directory, and
// `stop` and `delete` print <cmd>-notfound.err, with {id} replaced, for one
// that does not. `run` accepts only the options listed in run-flags.txt
// (extracted from Flags.swift of that version) and fails like Swift's
// ArgumentParser on any other.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	args := os.Args[1:]
	if err := loadEnv(filepath.Join(filepath.Dir(os.Args[0]), "fake.env")); err != nil {
		fail(err)
	}
	logPath := mustEnv("FAKE_CONTAINER_LOG")
	if err := logArgs(logPath, args); err != nil {
		fail(err)
	}
	dir := filepath.Join(mustEnv("FAKE_CONTAINER_DATA"), mustEnv("FAKE_CONTAINER_VERSION"))
	if _, err := os.Stat(dir); err != nil {
		fail(err)
	}
	state := os.Getenv("FAKE_CONTAINER_STATE")
	if state == "" {
		state = filepath.Dir(logPath)
	}
	f := &fake{dir: dir, state: state}
	if len(args) == 0 {
		os.Exit(f.replay("help", false))
	}
	switch args[0] {
	case "--version":
		os.Exit(f.replay("version", false))
	case "run", "stop", "delete", "rm":
		cmd := args[0]
		if cmd == "rm" {
			cmd = "delete"
		}
		// A recorded failure (the services are down) wins over the state.
		if _, err := os.Stat(filepath.Join(dir, cmd+".err")); err == nil {
			os.Exit(f.replay(cmd, false))
		}
		if cmd == "run" {
			os.Exit(f.run(args[1:]))
		}
		os.Exit(f.stopOrDelete(cmd, args[1:]))
	}
	var words []string
	jsonFormat := false
	for i, a := range args {
		switch {
		case a == "--format" && i+1 < len(args) && args[i+1] == "json", a == "--format=json":
			jsonFormat = true
		case strings.HasPrefix(a, "-"), i > 0 && args[i-1] == "--format":
		default:
			words = append(words, a)
		}
	}
	if args[0] == "ls" {
		words[0] = "list"
	}
	os.Exit(f.replay(strings.Join(words, "-"), jsonFormat))
}

type fake struct {
	dir   string // the version's recorded outputs
	state string // one file per container that exists
}

// replay writes the recorded outputs of name and returns its exit status.
func (f *fake) replay(name string, jsonFormat bool) int {
	out := name + ".out"
	if jsonFormat {
		out = name + ".json"
	}
	stdout, errOut := os.ReadFile(filepath.Join(f.dir, out))
	stderr, errErr := os.ReadFile(filepath.Join(f.dir, name+".err"))
	if errOut != nil && errErr != nil {
		// What ArgumentParser says of a subcommand it does not know.
		fmt.Fprintf(os.Stderr, "Error: Unexpected argument '%s'\n", name)
		return 64
	}
	if name == "system-status" {
		stdout = f.withAppRoot(stdout)
	}
	os.Stdout.Write(stdout)
	os.Stderr.Write(stderr)
	return f.exitStatus(name)
}

// appRootRE is the appRoot of `system status --format json`, flat (up to
// 1.2.2) or under "paths" (1.4.1 on).
var appRootRE = regexp.MustCompile(`"appRoot":"(?:[^"\\]|\\.)*"`)

// withAppRoot returns the status with its appRoot replaced, when there is
// one to put in.
func (f *fake) withAppRoot(status []byte) []byte {
	root := os.Getenv("FAKE_CONTAINER_APP_ROOT")
	if root == "" {
		if fi, err := os.Stat(filepath.Join(f.dir, "appRoot")); err != nil || !fi.IsDir() {
			return status
		}
		root = filepath.Join(f.dir, "appRoot")
	}
	quoted, err := json.Marshal(root + "/")
	if err != nil {
		fail(err)
	}
	return appRootRE.ReplaceAllLiteral(status, append([]byte(`"appRoot":`), quoted...))
}

func (f *fake) exitStatus(name string) int {
	b, err := os.ReadFile(filepath.Join(f.dir, name+".exit"))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		fail(err)
	}
	return n
}

// run pretends to run a container in the foreground.
func (f *fake) run(args []string) int {
	flags, err := f.runFlags()
	if err != nil {
		fail(err)
	}
	var name, image string
	var volumes []string
	remove := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			image = a
			break
		}
		opt, value, hasValue := strings.Cut(a, "=")
		takesValue, ok := flags[opt]
		if !ok {
			fmt.Fprintf(os.Stderr, "Error: Unknown option '%s'\nUsage: container run [<options>] <image> [<arguments> ...]\n  See 'container run --help' for more information.\n", opt)
			return 64
		}
		if takesValue && !hasValue {
			if i+1 >= len(args) {
				fmt.Fprintf(os.Stderr, "Error: Missing value for '%s'\n", opt)
				return 64
			}
			i++
			value = args[i]
		}
		switch opt {
		case "-c", "--cpus": // Int64 in Flags.swift
			if _, err := strconv.ParseInt(value, 10, 64); err != nil {
				fmt.Fprintf(os.Stderr, "Error: The value '%s' is invalid for '--cpus <cpus>'\n", value)
				return 64
			}
		case "--progress":
			if !slices.Contains([]string{"auto", "none", "ansi", "plain", "color"}, value) {
				fmt.Fprintf(os.Stderr, "Error: The value '%s' is invalid for '--progress <type>'\n", value)
				return 64
			}
		case "--name":
			name = value
		case "-v", "--volume":
			volumes = append(volumes, value)
		case "--rm", "--remove":
			remove = true
		}
	}
	if image == "" {
		fmt.Fprintln(os.Stderr, "Error: Missing expected argument '<image>'")
		return 64
	}
	if name == "" {
		name = "3f0b6f3c-1d2e-4c5b-9a8f-7e6d5c4b3a21"
	}
	for _, v := range volumes {
		src, _, _ := strings.Cut(strings.TrimLeft(v, ":"), ":")
		if _, err := os.Stat(src); err != nil {
			fmt.Fprintf(os.Stderr, "Error: invalidArgument: \"path '%s' does not exist\"\n", src)
			return 1
		}
	}
	path := filepath.Join(f.state, name)
	if _, err := os.Stat(path); err == nil {
		fmt.Fprintf(os.Stderr, "Error: exists: \"container with id %s already exists\"\n", name)
		return 1
	}
	if err := os.WriteFile(path, []byte("running\n"), 0o644); err != nil {
		fail(err)
	}
	if os.Getenv("FAKE_CONTAINER_RUN_SELFKILL") == "1" {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	repeat := 1
	if s := os.Getenv("FAKE_CONTAINER_RUN_STDOUT_REPEAT"); s != "" {
		if repeat, err = strconv.Atoi(s); err != nil {
			fail(err)
		}
	}
	fmt.Fprint(os.Stdout, strings.Repeat(os.Getenv("FAKE_CONTAINER_RUN_STDOUT"), repeat))
	fmt.Fprint(os.Stderr, os.Getenv("FAKE_CONTAINER_RUN_STDERR"))
	exit := 0
	if s := os.Getenv("FAKE_CONTAINER_RUN_EXIT"); s != "" {
		if exit, err = strconv.Atoi(s); err != nil {
			fail(err)
		}
	}
	if s := os.Getenv("FAKE_CONTAINER_RUN_SLEEP"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			fail(err)
		}
		ignoreStop := os.Getenv("FAKE_CONTAINER_RUN_IGNORE_STOP") == "1"
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(path + ".stop"); err == nil && !ignoreStop {
				exit = 128 + int(syscall.SIGTERM) // the agent died of stop's SIGTERM
				break
			}
			if _, err := os.Stat(path); err != nil { // deleted by force
				return 137
			}
		}
	}
	if remove {
		os.Remove(path)
		os.Remove(path + ".stop")
	}
	return exit
}

// runFlags reads run-flags.txt: lines "option --name -n" or "flag --name".
func (f *fake) runFlags() (map[string]bool, error) {
	file, err := os.Open(filepath.Join(f.dir, "run-flags.txt"))
	if err != nil {
		return nil, err
	}
	defer file.Close()
	flags := map[string]bool{}
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		for _, name := range fields[1:] {
			flags[name] = fields[0] == "option"
		}
	}
	return flags, sc.Err()
}

// stopOrDelete pretends to stop or delete containers.
func (f *fake) stopOrDelete(cmd string, args []string) int {
	var ids []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case slices.Contains([]string{"-t", "--time", "-s", "--signal"}, a):
			i++
		case strings.HasPrefix(a, "-"):
		default:
			ids = append(ids, a)
		}
	}
	tmpl, err := os.ReadFile(filepath.Join(f.dir, cmd+"-notfound.err"))
	if err != nil {
		fail(err)
	}
	status := 0
	for _, id := range ids {
		path := filepath.Join(f.state, id)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			os.Stderr.WriteString(strings.ReplaceAll(string(tmpl), "{id}", id))
			status = 1
			continue
		}
		if cmd == "stop" {
			os.WriteFile(path+".stop", nil, 0o644)
		} else {
			os.Remove(path)
			os.Remove(path + ".stop")
		}
		fmt.Println(id)
	}
	return status
}

// loadEnv sets the variables of path, a JSON object, when there is one:
// the tests link the fake into a directory of their own with its
// environment next to it, so that tests run in parallel without writing
// executables (which a concurrent fork makes fail with ETXTBSY).
func loadEnv(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var env map[string]string
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for k, v := range env {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return nil
}

func logArgs(path string, args []string) error {
	line, err := json.Marshal(args)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func mustEnv(k string) string {
	v := os.Getenv(k)
	if v == "" {
		fail(fmt.Errorf("%s is not set", k))
	}
	return v
}

// fail reports a broken test setup: exit 99, which no recorded output uses.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "fakecontainer:", err)
	os.Exit(99)
}
