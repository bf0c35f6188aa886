package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// trampolineArg, as a program's first argument, makes this package's init
// confine the process and execute the command that follows.
const trampolineArg = "-flashstep-sandbox"

// Report is the variable through which a confined command learns what
// held, for its reply and its tests: "landlock=7 uid=65534 fsize=0" or
// "landlock=none (…) …".
const Report = "FLASHSTEP_SANDBOX"

// policy is what the parent tells the trampoline.
type policy struct {
	Target      int      `json:"target"` // descriptor of the command's binary
	Self        int      `json:"self"`   // descriptor of the trampoline's own, closed before the command runs
	Dir         string   `json:"dir"`
	Writable    bool     `json:"writable"`
	FSize       uint64   `json:"fsize"`
	NProc       uint64   `json:"nproc"` // 0: unchanged (the server's own user)
	Also        []int    `json:"also"`  // descriptors of other binaries it may execute (a wrapper's command)
	Readable    []string `json:"readable,omitempty"`
	NoLandlock  bool     `json:"no_landlock,omitempty"`
	ReadWrite   []string `json:"read_write,omitempty"`
	KeepNetwork bool     `json:"keep_network,omitempty"`
	KeepScope   bool     `json:"keep_scope,omitempty"`
	// WholeProc lets a wrapper reach every process's /proc entry (a
	// sanitizer's, of the command it starts).
	WholeProc bool `json:"whole_proc,omitempty"`
	NetNS     bool `json:"netns,omitempty"` // the parent gave it a network namespace of its own
}

func init() {
	if len(os.Args) >= 3 && os.Args[1] == trampolineArg {
		err := trampoline(os.Args[2], os.Args[3:])
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(126)
	}
}

// trampoline confines this process and executes the command; it returns
// only when it cannot.
func trampoline(raw string, args []string) error {
	// Landlock and no_new_privs bind the calling thread, and execve keeps
	// what the calling thread had: all of it happens on this one.
	runtime.LockOSThread()
	var pol policy
	if err := json.Unmarshal([]byte(raw), &pol); err != nil {
		return err
	}
	if err := setLimits(pol); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	held, err := restrict(pol)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	unix.CloseOnExec(pol.Self)
	env := append(os.Environ(), fmt.Sprintf("%s=landlock=%s uid=%d fsize=%d nofile=%d netns=%v", Report, held, os.Getuid(), pol.FSize, maxOpenFiles, pol.NetNS))
	target := "/proc/self/fd/" + strconv.Itoa(pol.Target)
	return unix.Exec(target, append([]string{filepath.Base(target)}, args...), env)
}

// setLimits sets the policy's resource limits on this process.
func setLimits(pol policy) error {
	// syscall's Setrlimit, not unix's: it tells the runtime not to put
	// back its own open-files limit when it executes the command.
	set := func(what int, n uint64) error {
		return syscall.Setrlimit(what, &syscall.Rlimit{Cur: n, Max: n})
	}
	if err := set(unix.RLIMIT_FSIZE, pol.FSize); err != nil {
		return fmt.Errorf("RLIMIT_FSIZE: %w", err)
	}
	if err := set(unix.RLIMIT_NOFILE, maxOpenFiles); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if err := set(unix.RLIMIT_CORE, 0); err != nil {
		return fmt.Errorf("RLIMIT_CORE: %w", err)
	}
	if pol.NProc > 0 {
		if err := set(unix.RLIMIT_NPROC, pol.NProc); err != nil {
			return fmt.Errorf("RLIMIT_NPROC: %w", err)
		}
	}
	return nil
}

// Landlock's access rights by the ABI that introduced them.
const (
	fsV1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsV2 = fsV1 | unix.LANDLOCK_ACCESS_FS_REFER
	fsV3 = fsV2 | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	fsV5 = fsV3 | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	// Rights that apply to a file (the others concern directories).
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	readExec = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	readOnly = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	device   = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV |
		unix.LANDLOCK_ACCESS_FS_READ_DIR
)

// rulesetAttr is struct landlock_ruleset_attr as ABI 6 and 7 know it.
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// pathBeneath is struct landlock_path_beneath_attr (packed: 12 bytes).
type pathBeneath struct {
	allowed  uint64
	parentFD int32
	_        [4]byte
}

// readable are the paths a confined process may read: the system's
// libraries and programs (CUDA's among them), the loader's cache, its
// own /proc entry, the driver's and the kernel's published settings.
// Not /etc, /home, /root, /tmp, /var, /srv, /opt, nor other processes.
var readable = []struct {
	path   string
	rights uint64
}{
	{"/usr", readExec}, {"/lib", readExec}, {"/lib64", readExec}, {"/lib32", readExec},
	{"/etc/ld.so.cache", readOnly}, {"/proc/driver/nvidia", readOnly},
	{"/proc/sys/vm", readOnly}, {"/proc/cpuinfo", readOnly}, {"/proc/meminfo", readOnly}, {"/proc/devices", readOnly},
	{"/proc/modules", readOnly}, {"/sys", readOnly},
	{"/dev/null", device}, {"/dev/zero", device}, {"/dev/urandom", device},
}

// restrict applies Landlock, as much of it as the kernel has, and says
// which ABI held ("none (why)" where the kernel has none).
func restrict(pol policy) (string, error) {
	if pol.NoLandlock {
		return "off", nil
	}
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return "none(" + errno.Error() + ")", nil
	}
	attr := rulesetAttr{handledFS: fsV1}
	size := unsafe.Sizeof(attr.handledFS)
	switch {
	case abi >= 5:
		attr.handledFS = fsV5
	case abi >= 3:
		attr.handledFS = fsV3
	case abi >= 2:
		attr.handledFS = fsV2
	}
	if abi >= 4 && !pol.KeepNetwork {
		// No TCP at all: the process talks to the server over pipes.
		attr.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		size = 2 * unsafe.Sizeof(attr.handledFS)
	}
	if abi >= 6 && !pol.KeepScope {
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return "", fmt.Errorf("create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	add := func(path string, rights uint64) error {
		f, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) {
				return nil // not on this machine
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		defer unix.Close(f)
		return addRule(int(fd), f, rights&attr.handledFS)
	}
	for _, r := range readable {
		if err := add(r.path, r.rights); err != nil {
			return "", err
		}
	}
	// The GPU's device files, and where CUDA's libraries may be besides
	// /usr.
	devices, _ := filepath.Glob("/dev/nvidia*")
	for _, d := range devices {
		if err := add(d, device); err != nil {
			return "", err
		}
	}
	// Its own /proc entry, where CUDA's driver writes and truncates as
	// well as reads (with reads alone cuInit fails:
	// CUDA_ERROR_OPERATING_SYSTEM, on the H200 machine); a wrapper's,
	// every process's, which the kernel's own permissions still limit to
	// the same user's.
	proc := "/proc/self"
	if pol.WholeProc {
		proc = "/proc"
	}
	if err := add(proc, attr.handledFS&^(unix.LANDLOCK_ACCESS_FS_MAKE_CHAR|unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK)); err != nil {
		return "", err
	}
	for _, path := range pol.ReadWrite {
		if err := add(path, attr.handledFS&^(unix.LANDLOCK_ACCESS_FS_MAKE_CHAR|unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK)); err != nil {
			return "", err
		}
	}
	for _, path := range pol.Readable {
		if err := add(path, readExec); err != nil {
			return "", err
		}
	}
	for _, dir := range strings.Split(os.Getenv("LD_LIBRARY_PATH"), ":") {
		if filepath.IsAbs(dir) {
			if err := add(dir, readExec); err != nil {
				return "", err
			}
		}
	}
	dirRights := uint64(readOnly)
	if pol.Writable {
		dirRights = attr.handledFS &^ (unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK)
	}
	if err := add(pol.Dir, dirRights); err != nil {
		return "", err
	}
	// The command's own binary, by the descriptor the parent gave.
	for _, bin := range append([]int{pol.Target}, pol.Also...) {
		if err := addRule(int(fd), bin, readExec&attr.handledFS); err != nil {
			return "", fmt.Errorf("the command's binary: %w", err)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return "", fmt.Errorf("restrict_self: %w", errno)
	}
	return strconv.Itoa(int(abi)), nil
}

// addRule lets what lies beneath the open path parent (or that file) be
// used with rights; a file keeps only the rights that apply to files.
func addRule(ruleset, parent int, rights uint64) error {
	var st unix.Stat_t
	if err := unix.Fstat(parent, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= fileRights
	}
	attr := pathBeneath{allowed: rights, parentFD: int32(parent)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
