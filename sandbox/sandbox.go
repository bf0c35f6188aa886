// Package sandbox confines the process that compiles and runs a student's
// kernel, so that a source that gets past the lab's own check
// (lab.CheckSource) still finds nothing of the server's:
//
//   - an environment of CUDA's variables only, never the server's;
//   - an empty working directory of its own, removed afterwards;
//   - an unprivileged user (nobody by default) where the server runs as
//     root, with no supplementary groups;
//   - resource limits: no file written (RLIMIT_FSIZE 0; a sanitizer's
//     report is the one exception, in the process's own directory), a
//     bounded number of open files and of the user's processes, no core;
//   - a network namespace of its own, where the server is root: no
//     socket reaches out, and /proc/self/net shows no other process's
//     connections;
//   - where the Linux kernel offers it, Landlock: reads limited to the
//     system's libraries (/usr, /lib), the GPU's device files and the
//     process's own /proc entry (which CUDA's driver also writes); no TCP;
//     signals and abstract sockets kept inside the sandbox (Landlock ABI
//     6 and later). Under a wrapper (compute-sanitizer), which executes
//     the command as its child, the one domain reaches every /proc entry.
//
// Landlock restricts the thread that asks and what it executes; a Go
// program has many threads, so the restriction is made by a trampoline:
// the parent starts its own binary (opened by descriptor, since an
// unprivileged user may not reach it by path) with a hidden first
// argument; this package's init, before any other code of the program
// runs, sees it, sets the limits, restricts its locked thread and
// executes the real command from that thread, which then inherits all of
// it. Any program that starts confined processes therefore imports this
// package, which costs it one comparison at start-up.
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Options say how a confined process runs.
type Options struct {
	// User is who the process runs as when the server is root: a name or
	// a uid ("" : nobody). A server that is not root cannot change user,
	// and runs the process as itself under the other limits.
	User string
	// Env is added to the process's environment (beyond CUDA's variables,
	// which pass from the server's own); tests name their child mode here.
	Env []string
	// Writable lets the process write files in its own directory (up to
	// WritableBytes): compute-sanitizer writes its report there.
	Writable bool
	// Wrapper, if set, is a program and its options that run the command
	// (compute-sanitizer): it is started instead, given the command's
	// binary by descriptor, since the confined user may not reach its
	// path.
	Wrapper []string
	// Readable are paths it may read besides the system's libraries and
	// the GPU's (package sandbox's list): CUDA installed elsewhere.
	Readable []string
	// ReadWrite are paths it may also create and write files in: a
	// driver's shared memory.
	ReadWrite []string
	// KeepNetwork and KeepScope leave Landlock's TCP rules and its
	// scoping of signals and abstract sockets out.
	KeepNetwork, KeepScope bool
	// HostNetwork keeps the server's network namespace.
	HostNetwork bool
	// NoLandlock leaves Landlock out (the other limits hold): a kernel
	// whose Landlock gets in the GPU driver's way.
	NoLandlock bool
}

// WritableBytes bounds a file a Writable process writes.
const WritableBytes = 16 << 20

// Limits a confined process runs under.
const (
	maxOpenFiles = 512 // CUDA's context opens a few dozen
	maxProcesses = 512 // the user's processes and threads: a CUDA process has tens of threads
)

// cudaVariables are the server's environment variables a confined process
// keeps: which GPUs it sees and where CUDA's libraries are.
var cudaVariables = []string{"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH"}

// Env is the environment of a confined process whose directory is dir:
// CUDA's variables from environ, the JIT cache off (it would write under
// HOME), HOME and TMPDIR in its own directory, a plain PATH, and extra.
func Env(environ []string, dir string, extra []string) []string {
	out := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir, "CUDA_CACHE_DISABLE=1", "LANG=C.UTF-8"}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		for _, keep := range cudaVariables {
			if name == keep {
				out = append(out, kv)
			}
		}
	}
	return append(out, extra...)
}

// Check says whether o can be had on this machine: its user exists and is
// not root.
func (o Options) Check() error {
	_, err := credential(o)
	return err
}

// Process is a confined command, ready to start: set Stdin, Stdout,
// Stderr and ExtraFiles on Cmd (ExtraFiles become descriptors 3, 4, …
// as always; the sandbox's own come after them), call Start, then Wait,
// then Cleanup.
type Process struct {
	Cmd *exec.Cmd
	// Dir is the process's own directory: empty when it starts.
	Dir     string
	self    *os.File
	target  *os.File
	inner   *os.File // the command's binary, when a wrapper runs it
	opts    Options
	argv    []string
	started bool
}

// Command prepares argv[0] (a path) with argv[1:] to run confined, killed
// with its whole process group when ctx ends.
func Command(ctx context.Context, argv []string, o Options) (*Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("sandbox: no command")
	}
	dir, err := os.MkdirTemp("", "flashstep-lab-")
	if err != nil {
		return nil, err
	}
	p := &Process{Dir: dir, opts: o, argv: argv}
	fail := func(err error) (*Process, error) {
		p.Cleanup()
		return nil, err
	}
	cred, err := credential(o)
	if err != nil {
		return fail(err)
	}
	// The directory: the process may enter it, not list it; a writable
	// one is its own.
	if err := os.Chmod(dir, 0o711); err != nil {
		return fail(err)
	}
	if cred != nil && o.Writable {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
		os.Chmod(dir, 0o700)
	}
	if len(o.Wrapper) > 0 {
		if p.inner, err = os.Open(argv[0]); err != nil {
			return fail(fmt.Errorf("sandbox: opening %s: %w", argv[0], err))
		}
		p.argv = append(o.Wrapper[:len(o.Wrapper):len(o.Wrapper)], argv...)
	}
	if p.target, err = os.Open(p.argv[0]); err != nil {
		return fail(fmt.Errorf("sandbox: opening %s: %w", p.argv[0], err))
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	if p.self, err = os.Open(exe); err != nil {
		return fail(fmt.Errorf("sandbox: opening %s: %w", exe, err))
	}
	cmd.Dir = dir
	cmd.Env = Env(os.Environ(), dir, o.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if cred != nil && !o.HostNetwork && netNamespaces() {
		// A network of its own, with nothing in it: no TCP, UDP or
		// socket of any kind reaches out, and /proc/self/net shows no
		// other process's connections (a classmate's address).
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET
	}
	cmd.Cancel = func() error {
		// The whole group: compute-sanitizer and the worker it started.
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	p.Cmd = cmd
	return p, nil
}

// Start starts the process: through the trampoline, which limits and
// restricts itself and then executes the command from the descriptor it
// was given.
func (p *Process) Start() error {
	cmd := p.Cmd
	n := 3 + len(cmd.ExtraFiles)
	pol := policy{FSize: 0, Writable: p.opts.Writable, Dir: p.Dir, Readable: p.opts.Readable, NoLandlock: p.opts.NoLandlock,
		ReadWrite: p.opts.ReadWrite, KeepNetwork: p.opts.KeepNetwork, KeepScope: p.opts.KeepScope}
	if p.opts.Writable {
		pol.FSize = WritableBytes
	}
	if cmd.SysProcAttr.Credential != nil {
		pol.NProc = maxProcesses
	}
	pol.NetNS = cmd.SysProcAttr.Cloneflags&syscall.CLONE_NEWNET != 0
	args := p.argv[1:]
	if p.inner != nil {
		// The wrapper executes the command by its descriptor, in the same
		// domain: compute-sanitizer loses a target that executes another
		// program ("terminated before first instrumented API call"), so
		// the trampoline cannot run again in between. The domain then
		// grants every process's /proc entry, as the command's own is not
		// the wrapper's; the kernel still limits them to the same user's.
		k := len(p.opts.Wrapper)
		args = append(append(p.argv[1:k:k], "/proc/self/fd/"+strconv.Itoa(n)), p.argv[k+1:]...)
		cmd.ExtraFiles = append(cmd.ExtraFiles, p.inner)
		pol.Also, pol.WholeProc = []int{n}, true
		n++
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, p.target, p.self)
	pol.Target, pol.Self = n, n+1
	raw, err := json.Marshal(pol)
	if err != nil {
		return err
	}
	cmd.Path = "/proc/self/fd/" + strconv.Itoa(n+1)
	cmd.Args = append([]string{filepath.Base(p.argv[0]), trampolineArg, string(raw)}, args...)
	p.started = true
	err = cmd.Start()
	// The child has its copies; the parent's are of no more use.
	p.closeFiles()
	return err
}

// Cleanup kills whatever the process left running in its group and
// removes its directory; call it after Wait.
func (p *Process) Cleanup() {
	if p.started && p.Cmd.Process != nil {
		syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	}
	p.closeFiles()
	if p.Dir != "" {
		os.RemoveAll(p.Dir)
	}
}

func (p *Process) closeFiles() {
	for _, f := range []*os.File{p.self, p.target, p.inner} {
		if f != nil {
			f.Close()
		}
	}
}

// netNamespaces says whether this process may give a child a network
// namespace of its own (root, and a kernel and container that allow it):
// tried once, on a thread that is then thrown away.
var netNamespaces = sync.OnceValue(func() bool {
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		done <- unix.Unshare(unix.CLONE_NEWNET)
	}()
	return <-done == nil
})

// credential is the user a confined process runs as: nil where the server
// cannot change user (not root).
func credential(o Options) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	name := o.User
	if name == "" {
		name = "nobody"
	}
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("sandbox: the lab's user %q does not exist on this machine (-lab-user)", name)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("sandbox: user %q has no numeric uid and gid", name)
	}
	if uid == 0 {
		return nil, fmt.Errorf("sandbox: the lab's user %q is root: name an unprivileged user (-lab-user)", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}
