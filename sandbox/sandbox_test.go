package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// probeChild, in its environment, makes this test binary the confined
// probe: it tries what a hostile kernel's process would and says what it
// could.
const probeChild = "SANDBOX_PROBE"

// probe is what the confined process found.
type probe struct {
	Environ     string   `json:"environ"`     // /proc/self/environ
	Read        []string `json:"read"`        // files it could read, of those it was asked to
	Wrote       bool     `json:"wrote"`       // a file in its own directory
	WroteBytes  int      `json:"wrote_bytes"` // how much of it
	Connected   bool     `json:"connected"`   // a TCP connection to the parent's listener
	UID         int      `json:"uid"`
	Dir         string   `json:"dir"`
	Report      string   `json:"report"`
	NoFile      uint64   `json:"nofile"`
	FSize       uint64   `json:"fsize"`
	Subprocess  bool     `json:"subprocess"` // could it start another program
	ServerFiles bool     `json:"server_files"`
	NetLines    int      `json:"net_lines"`   // connections /proc/self/net/tcp lists
	ParentProc  bool     `json:"parent_proc"` // could it read its parent's /proc entry (a wrapper's)
	ServerProc  bool     `json:"server_proc"` // could it read the server's (the test's) /proc entry
}

func TestMain(m *testing.M) {
	if os.Getenv(probeChild) == "1" && len(os.Args) > 2 && os.Args[1] == "--wrap" {
		// A wrapper, as compute-sanitizer is: it runs the command after
		// its option as its child.
		cmd := exec.Command(os.Args[2], os.Args[3:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if cmd.Run() != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(probeChild) == "1" {
		os.Exit(runProbe())
	}
	os.Exit(m.Run())
}

func runProbe() int {
	var p probe
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", os.Getppid())); err == nil && len(b) > 0 {
		p.ParentProc = true
	}
	if b, err := os.ReadFile("/proc/" + os.Getenv("SANDBOX_SERVER_PID") + "/cmdline"); err == nil && len(b) > 0 {
		p.ServerProc = true
	}
	if b, err := os.ReadFile("/proc/self/net/tcp"); err == nil {
		p.NetLines = strings.Count(string(b), "\n") - 1
	}
	env, _ := os.ReadFile("/proc/self/environ")
	p.Environ = string(env)
	for _, f := range strings.Split(os.Getenv("SANDBOX_FILES"), ",") {
		if f == "" {
			continue
		}
		if b, err := os.ReadFile(f); err == nil && len(b) > 0 {
			p.Read = append(p.Read, f)
		}
	}
	if f, err := os.Create("written"); err == nil {
		p.Wrote = true
		n, _ := f.Write(bytes.Repeat([]byte("x"), 4096))
		p.WroteBytes = n
		f.Close()
	}
	if c, err := net.DialTimeout("tcp", os.Getenv("SANDBOX_ADDR"), time.Second); err == nil {
		p.Connected = true
		c.Close()
	}
	p.UID = os.Getuid()
	p.Dir, _ = os.Getwd()
	p.Report = os.Getenv(Report)
	var rl syscall.Rlimit
	syscall.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	p.NoFile = rl.Cur
	syscall.Getrlimit(unix.RLIMIT_FSIZE, &rl)
	p.FSize = rl.Cur
	if _, err := os.ReadDir(os.Getenv("SANDBOX_REPO")); err == nil {
		p.ServerFiles = true
	}
	json.NewEncoder(os.Stdout).Encode(p)
	return 0
}

// runProbeConfined starts this test binary as the probe under o and reads
// what it found.
func runProbeConfined(t *testing.T, o Options, files []string) (probe, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	repo, _ := filepath.Abs("..")
	o.Env = append(o.Env, probeChild+"=1", "SANDBOX_FILES="+strings.Join(files, ","), "SANDBOX_ADDR="+ln.Addr().String(), "SANDBOX_REPO="+repo, fmt.Sprintf("SANDBOX_SERVER_PID=%d", os.Getpid()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := Command(ctx, []string{os.Args[0]}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Cleanup()
	var out, errOut bytes.Buffer
	p.Cmd.Stdout, p.Cmd.Stderr = &out, &errOut
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Wait(); err != nil {
		t.Fatalf("the probe failed: %v\n%s", err, errOut.String())
	}
	var got probe
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("the probe answered %q (%v); stderr %s", out.String(), err, errOut.String())
	}
	return got, p.Dir
}

// A secret the server holds: in its environment, in a file only root may
// read, in a file anyone may read outside the libraries. The confined
// process sees none of it, writes nothing, connects nowhere.
func TestConfinedProcessFindsNothingOfTheServer(t *testing.T) {
	t.Setenv("FLASHSTEP_TEST_SECRET", "s3cr3t-environment")
	secretDir := t.TempDir()
	rootOnly := filepath.Join(secretDir, "root-only")
	if err := os.WriteFile(rootOnly, []byte("s3cr3t-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	worldReadable := filepath.Join(secretDir, "world-readable")
	if err := os.WriteFile(worldReadable, []byte("s3cr3t-world"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(secretDir, 0o755)
	got, dir := runProbeConfined(t, Options{}, []string{rootOnly, worldReadable, "/etc/passwd", "/proc/1/environ"})
	t.Logf("the sandbox held: %s", got.Report)

	if strings.Contains(got.Environ, "s3cr3t") || strings.Contains(got.Environ, "FLASHSTEP_TEST_SECRET") {
		t.Errorf("the confined process's environment holds the server's: %q", got.Environ)
	}
	for _, kv := range strings.Split(strings.TrimRight(got.Environ, "\x00"), "\x00") {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PATH", "HOME", "TMPDIR", "CUDA_CACHE_DISABLE", "LANG", Report, probeChild, "SANDBOX_FILES", "SANDBOX_ADDR", "SANDBOX_REPO", "SANDBOX_SERVER_PID":
		default:
			if !containsString(cudaVariables, name) {
				t.Errorf("the confined process's environment holds %q", kv)
			}
		}
	}
	if len(got.Read) > 0 {
		t.Errorf("the confined process read %v", got.Read)
	}
	if got.Wrote && got.WroteBytes > 0 {
		t.Errorf("the confined process wrote %d bytes into its directory", got.WroteBytes)
	}
	if got.Dir != dir {
		t.Errorf("the confined process ran in %q, want its own directory %q", got.Dir, dir)
	}
	if got.FSize != 0 || got.NoFile != maxOpenFiles {
		t.Errorf("limits: fsize %d, nofile %d; want 0 and %d", got.FSize, got.NoFile, maxOpenFiles)
	}
	if os.Geteuid() == 0 && got.UID == 0 {
		t.Errorf("the server is root and so is the confined process")
	}
	if strings.Contains(got.Report, "netns=true") && (got.NetLines != 0 || got.Connected) {
		t.Errorf("in a network of its own, the process sees %d connections and connected: %v", got.NetLines, got.Connected)
	}
	if os.Geteuid() == 0 && !strings.Contains(got.Report, "netns=true") {
		t.Logf("no network namespace here: %s", got.Report)
	}
	if landlocked() {
		if got.ParentProc {
			t.Errorf("the confined process read its parent's /proc entry")
		}
		if !strings.Contains(got.Report, "landlock=") || strings.Contains(got.Report, "landlock=none") {
			t.Errorf("this kernel has Landlock, but the report says %q", got.Report)
		}
		if got.Connected {
			t.Errorf("the confined process connected over TCP")
		}
		if got.ServerFiles {
			t.Errorf("the confined process listed the repository's files")
		}
	} else {
		t.Logf("this kernel has no Landlock: reads are held by the user's permissions alone")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		// Cleanup runs deferred in runProbeConfined: the directory is gone.
		t.Errorf("the process's directory %s outlived it (%v)", dir, err)
	}
}

// A sanitizer's report is the one file written, in the process's own
// directory, and bounded.
func TestWritableProcessWritesOnlyItsDirectory(t *testing.T) {
	got, _ := runProbeConfined(t, Options{Writable: true}, nil)
	if !got.Wrote || got.WroteBytes != 4096 {
		t.Errorf("a writable process wrote %v, %d bytes; want its 4096", got.Wrote, got.WroteBytes)
	}
	if got.FSize != WritableBytes {
		t.Errorf("fsize %d, want %d", got.FSize, WritableBytes)
	}
}

func TestUnknownUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root changes user")
	}
	_, err := Command(context.Background(), []string{os.Args[0]}, Options{User: "no-such-user-here"})
	if err == nil || !strings.Contains(err.Error(), "no-such-user-here") {
		t.Errorf("Command with an unknown user = %v, want an error naming it", err)
	}
	_, err = Command(context.Background(), []string{os.Args[0]}, Options{User: "root"})
	if err == nil || !strings.Contains(err.Error(), "unprivileged") {
		t.Errorf("Command as root = %v, want a refusal", err)
	}
}

func landlocked() bool {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	return errno == 0
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
