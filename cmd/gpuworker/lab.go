//go:build gpu

package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

// NVRTC is loaded at run time from the GPU machine's CUDA installation:
// nothing here links it, so the worker runs where it is missing and says so.
typedef int (*fs_nvrtc_create)(void **, const char *, const char *, int, const char *const *, const char *const *);
typedef int (*fs_nvrtc_compile)(void *, int, const char *const *);
typedef int (*fs_nvrtc_size)(void *, size_t *);
typedef int (*fs_nvrtc_get)(void *, char *);
typedef int (*fs_nvrtc_destroy)(void **);

static void *fs_nvrtc;

// fs_flush_printf pushes what the kernel's printf left in C's buffer for
// standard output to the pipe: Go's exit does not run C's.
static void fs_flush_printf(void) { fflush(stdout); }

static const char *fs_nvrtc_open(void) {
	const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so"};
	for (int k = 0; k < 5 && !fs_nvrtc; k++) fs_nvrtc = dlopen(names[k], RTLD_NOW);
	return fs_nvrtc ? NULL : dlerror();
}

// fs_nvrtc_error names an NVRTC result.
typedef const char *(*fs_nvrtc_errstr)(int);
static const char *fs_nvrtc_error(int r) {
	fs_nvrtc_errstr f = (fs_nvrtc_errstr)dlsym(fs_nvrtc, "nvrtcGetErrorString");
	return f ? f(r) : "unnamed";
}

// fs_nvrtc_ptx compiles src; on success *ptx holds the PTX, else *log the
// compiler's messages (either may be set either way). Returns NVRTC's result,
// or -1 when a symbol is missing.
static int fs_nvrtc_ptx(const char *src, const char *arch, int nofma, char **ptx, char **log) {
	fs_nvrtc_create create = (fs_nvrtc_create)dlsym(fs_nvrtc, "nvrtcCreateProgram");
	fs_nvrtc_compile compile = (fs_nvrtc_compile)dlsym(fs_nvrtc, "nvrtcCompileProgram");
	fs_nvrtc_size logSize = (fs_nvrtc_size)dlsym(fs_nvrtc, "nvrtcGetProgramLogSize");
	fs_nvrtc_get getLog = (fs_nvrtc_get)dlsym(fs_nvrtc, "nvrtcGetProgramLog");
	fs_nvrtc_size ptxSize = (fs_nvrtc_size)dlsym(fs_nvrtc, "nvrtcGetPTXSize");
	fs_nvrtc_get getPTX = (fs_nvrtc_get)dlsym(fs_nvrtc, "nvrtcGetPTX");
	fs_nvrtc_destroy destroy = (fs_nvrtc_destroy)dlsym(fs_nvrtc, "nvrtcDestroyProgram");
	if (!create || !compile || !logSize || !getLog || !ptxSize || !getPTX || !destroy) return -1;
	void *prog = NULL;
	int r = create(&prog, src, "student.cu", 0, NULL, NULL);
	if (r) return r;
	// -lineinfo: compute-sanitizer's reports name the student's lines.
	const char *opts[] = {arch, "--std=c++17", "-default-device", "-lineinfo", "--fmad=false"};
	int cr = compile(prog, nofma ? 5 : 4, opts);
	size_t n = 0;
	if (!logSize(prog, &n) && n > 1) {
		*log = malloc(n);
		getLog(prog, *log);
	}
	if (!cr && !ptxSize(prog, &n)) {
		*ptx = malloc(n);
		getPTX(prog, *ptx);
	}
	destroy(&prog);
	return cr;
}
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/sandbox"
)

// labMain is `gpuworker -lab`: one student's kernel, in a process of its
// own, confined by the server (package sandbox). It reads a
// lab.KernelRequest on standard input, compiles the source with NVRTC,
// launches it on each run and writes a lab.KernelReply on descriptor
// lab.ReplyFD, saying first each stage it enters; standard output is the
// kernel's printf. A kernel that faults poisons this process's context
// only; one that never ends is killed by the server's watchdog.
func labMain() int {
	runtime.LockOSThread()
	out := os.NewFile(lab.ReplyFD, "reply")
	if _, err := out.Stat(); err != nil {
		fmt.Fprintln(os.Stderr, "gpuworker -lab answers on descriptor 3, which is not open:", err)
		return 1
	}
	replies := json.NewEncoder(out)
	reply := labRun(os.Stdin, func(stage string) { replies.Encode(lab.Progress{Progress: stage}) })
	C.fs_flush_printf()
	if os.Getenv(sandbox.Report) != "" {
		reply.Sandbox = os.Getenv(sandbox.Report)
	}
	if err := replies.Encode(reply); err != nil {
		fmt.Fprintln(os.Stderr, "gpuworker -lab: writing the reply:", err)
		return 1
	}
	return 0
}

func labRun(in io.Reader, progress func(stage string)) lab.KernelReply {
	var req lab.KernelRequest
	if err := json.NewDecoder(io.LimitReader(in, 4<<20)).Decode(&req); err != nil {
		return lab.KernelReply{Stage: "load", Error: "reading the request: " + err.Error()}
	}
	if len(req.Source) > lab.MaxSourceBytes {
		return lab.KernelReply{Stage: "compile", Error: fmt.Sprintf("the source is %d bytes, above the %d-byte limit", len(req.Source), lab.MaxSourceBytes)}
	}
	if msg := C.fs_nvrtc_open(); msg != nil {
		return lab.KernelReply{Stage: "compile", Error: "NVRTC is not installed on this GPU machine: " + C.GoString(msg)}
	}
	n, err := cu.NumDevices()
	if err != nil || n == 0 {
		return lab.KernelReply{Stage: "load", Error: fmt.Sprintf("no CUDA device (%v)", err)}
	}
	dev, err := cu.GetDevice(0)
	if err != nil {
		return lab.KernelReply{Stage: "load", Error: err.Error()}
	}
	major, _ := dev.Attribute(cu.ComputeCapabilityMajor)
	minor, _ := dev.Attribute(cu.ComputeCapabilityMinor)
	ctx, err := dev.MakeContext(cu.SchedAuto)
	if err != nil {
		return lab.KernelReply{Stage: "load", Error: "creating a CUDA context: " + err.Error()}
	}
	defer ctx.Destroy()

	progress("compile")
	src := C.CString(lab.Harness(req.Br, req.Bc, req.D) + req.Source)
	defer C.free(unsafe.Pointer(src))
	arch := C.CString(fmt.Sprintf("--gpu-architecture=compute_%d%d", major, minor))
	defer C.free(unsafe.Pointer(arch))
	var ptx, clog *C.char
	nofma := C.int(0)
	if req.NoFMA {
		nofma = 1
	}
	r := C.fs_nvrtc_ptx(src, arch, nofma, &ptx, &clog)
	reply := lab.KernelReply{Stage: "compile"}
	if clog != nil {
		reply.Log = C.GoString(clog)
		C.free(unsafe.Pointer(clog))
		if len(reply.Log) > lab.MaxLogBytes {
			reply.Log = reply.Log[:lab.MaxLogBytes] + "\n…"
		}
	}
	if r != 0 || ptx == nil {
		switch {
		case r == -1:
			reply.Error = "this NVRTC lacks a function the lab needs"
		case strings.TrimSpace(reply.Log) == "":
			// NVRTC gave up without a message (a source deep enough to
			// exhaust its own limits does this): say so, with its code.
			reply.Crash = fmt.Sprintf("The compiler stopped on your source without saying why (NVRTC's result %d, %s). "+
				"A compiler gives up this way on nesting or recursion it cannot see the end of: thousands of nested parentheses or blocks, "+
				"or a template or constexpr function that instantiates itself without a base case.", int(r), C.GoString(C.fs_nvrtc_error(r)))
		}
		return reply
	}
	code := C.GoString(ptx)
	C.free(unsafe.Pointer(ptx))

	reply.Stage = "load"
	progress("load")
	mod, err := cu.LoadData(code)
	if err != nil {
		reply.Error = "loading the compiled kernel: " + err.Error()
		return reply
	}
	fn, err := mod.Function("attention")
	if err != nil {
		reply.Error = `your source has no kernel extern "C" __global__ void attention(…)`
		return reply
	}
	reply.Stage = "run"
	progress("run")
	if req.Timing != nil {
		if reply.TimedMs, err = labTime(mod, fn, &req); err != nil {
			reply.Error = err.Error()
			return reply
		}
		reply.Stage = "done"
		return reply
	}
	for _, q := range req.Runs {
		run, err := labLaunch(mod, fn, &req, q)
		C.fs_flush_printf()
		if err != nil {
			reply.Error = err.Error()
			return reply
		}
		reply.Runs = append(reply.Runs, run)
	}
	reply.Stage = "done"
	return reply
}

// labLaunch runs the student's kernel once on run q: the run's own inputs
// (those the mirror and the reference kernel see), fresh buffers for O, the
// LSE and the records, and the grid of one block of FS_BR threads per
// q-tile and batch-head.
func labLaunch(mod cu.Module, fn cu.Function, req *lab.KernelRequest, q string) (lab.KernelRun, error) {
	v, err := url.ParseQuery(q)
	if err != nil {
		return lab.KernelRun{}, err
	}
	r, err := kernels.ParseRun(v)
	if err != nil {
		return lab.KernelRun{}, err
	}
	c := r.Config()
	bh := c.Batch * c.Heads
	tr, tc := (c.N+req.Br-1)/req.Br, (c.N+req.Bc-1)/req.Bc
	var mem allocs
	defer mem.free()
	join := func(pick func(*kernels.Inputs) []float32) []float32 {
		var all []float32
		for b := range bh {
			all = append(all, pick(kernels.InputsFor(&c, b))...)
		}
		return all
	}
	in := map[string][]float32{
		"q": join(func(x *kernels.Inputs) []float32 { return x.Q }),
		"k": join(func(x *kernels.Inputs) []float32 { return x.K }),
		"v": join(func(x *kernels.Inputs) []float32 { return x.V }),
	}
	bufs := map[string]cu.DevicePtr{}
	for _, name := range []string{"q", "k", "v"} {
		if bufs[name], err = mem.upload(in[name]); err != nil {
			return lab.KernelRun{}, err
		}
	}
	stepSlot, outSlot := 16+4*req.D, 8+4*req.D
	sizes := map[string]int64{"o": int64(bh * c.N * c.D * 4), "lse": int64(bh * c.N * 4),
		"steps": int64(bh*tr*tc*req.Br) * int64(stepSlot), "outs": int64(bh*c.N) * int64(outSlot), "stray": 4}
	for name, size := range sizes {
		if bufs[name], err = mem.alloc(size); err != nil {
			return lab.KernelRun{}, err
		}
		if err := cu.MemsetD8(bufs[name], 0, size); err != nil {
			return lab.KernelRun{}, err
		}
	}
	// NaN in O and the LSE: a row the kernel never writes cannot pass.
	nan := make([]float32, bh*c.N*c.D)
	for k := range nan {
		nan[k] = float32(math.NaN())
	}
	if err := cu.MemcpyHtoD(bufs["o"], unsafe.Pointer(&nan[0]), sizes["o"]); err != nil {
		return lab.KernelRun{}, err
	}
	if err := cu.MemcpyHtoD(bufs["lse"], unsafe.Pointer(&nan[0]), sizes["lse"]); err != nil {
		return lab.KernelRun{}, err
	}
	if err := setHarness(mod, bufs["steps"], bufs["outs"], bufs["stray"], tc, c.N); err != nil {
		return lab.KernelRun{}, err
	}
	args := []uint64{uint64(bufs["q"]), uint64(bufs["k"]), uint64(bufs["v"]), uint64(bufs["o"]), uint64(bufs["lse"]),
		uint64(c.N), uint64(math.Float32bits(c.Scale()))}
	if req.Causal {
		causal := uint64(0)
		if c.Causal {
			causal = 1
		}
		args = append(args, causal)
	}
	ptrs := make([]unsafe.Pointer, len(args))
	for k := range args {
		ptrs[k] = unsafe.Pointer(&args[k])
	}
	start := time.Now()
	if err := fn.Launch(tr, bh, 1, req.Br, 1, 1, 0, cu.NoStream, ptrs); err != nil {
		return lab.KernelRun{}, fmt.Errorf("launching your kernel: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return lab.KernelRun{}, fmt.Errorf("your kernel failed on the GPU: %w", err)
	}
	out := lab.KernelRun{Ms: float64(time.Since(start).Microseconds()) / 1000}
	down := func(name string) ([]byte, error) {
		b := make([]byte, sizes[name])
		return b, cu.MemcpyDtoH(unsafe.Pointer(&b[0]), bufs[name], sizes[name])
	}
	floats := func(b []byte) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4) }
	ob, err := down("o")
	if err != nil {
		return out, err
	}
	lb, err := down("lse")
	if err != nil {
		return out, err
	}
	out.O, out.LSE = append([]float32(nil), floats(ob)...), append([]float32(nil), floats(lb)...)
	sb, err := down("steps")
	if err != nil {
		return out, err
	}
	for k := 0; k < len(sb)/stepSlot; k++ {
		slot := floats(sb[k*stepSlot : (k+1)*stepSlot])
		if math.Float32bits(slot[2]) == 0 {
			continue
		}
		r := k % req.Br
		j := (k / req.Br) % tc
		i := (k / req.Br / tc) % tr
		out.Steps = append(out.Steps, lab.StepSeen{BH: k / req.Br / tc / tr, I: i, J: j, R: r, M: lab.Float(slot[0]), L: lab.Float(slot[1]), O: append([]float32(nil), slot[4:]...)})
	}
	ub, err := down("outs")
	if err != nil {
		return out, err
	}
	for k := 0; k < len(ub)/outSlot; k++ {
		slot := floats(ub[k*outSlot : (k+1)*outSlot])
		if math.Float32bits(slot[1]) == 0 {
			continue
		}
		out.Outs = append(out.Outs, lab.OutSeen{BH: k / c.N, Row: k % c.N, LSE: lab.Float(slot[0]), O: append([]float32(nil), slot[2:]...)})
	}
	stray, err := down("stray")
	if err != nil {
		return out, err
	}
	out.Stray = int(*(*int32)(unsafe.Pointer(&stray[0])))
	return out, nil
}

// labTime times the student's kernel at req.Timing's size with its records
// off (the harness's buffers null): one launch to warm up, then the median
// of Repeats between CUDA events. Q, K and V hold one small value: the
// time does not depend on them.
func labTime(mod cu.Module, fn cu.Function, req *lab.KernelRequest) (float64, error) {
	t := req.Timing
	if t.N < 1 || t.N > kernels.MaxN*8 || t.Batch*t.Heads < 1 || t.Batch*t.Heads > 4096 || t.Repeats < 1 || t.Repeats > 20 {
		return 0, fmt.Errorf("a timed launch of N=%d, %d×%d heads, %d repeats is out of bounds", t.N, t.Batch, t.Heads, t.Repeats)
	}
	bh := t.Batch * t.Heads
	var mem allocs
	defer mem.free()
	elems := int64(bh) * int64(t.N) * int64(req.D)
	bufs := map[string]cu.DevicePtr{}
	for _, name := range []string{"q", "k", "v", "o"} {
		p, err := mem.alloc(4 * elems)
		if err != nil {
			return 0, err
		}
		if err := cu.MemsetD32(p, math.Float32bits(0.01), elems); err != nil {
			return 0, err
		}
		bufs[name] = p
	}
	var err error
	if bufs["lse"], err = mem.alloc(4 * int64(bh*t.N)); err != nil {
		return 0, err
	}
	if bufs["stray"], err = mem.alloc(8); err != nil {
		return 0, err
	}
	if err := setHarness(mod, 0, 0, bufs["stray"], (t.N+req.Bc-1)/req.Bc, t.N); err != nil {
		return 0, err
	}
	scale := float32(1 / math.Sqrt(float64(req.D)))
	args := []uint64{uint64(bufs["q"]), uint64(bufs["k"]), uint64(bufs["v"]), uint64(bufs["o"]), uint64(bufs["lse"]),
		uint64(t.N), uint64(math.Float32bits(scale))}
	if req.Causal {
		causal := uint64(0)
		if t.Causal {
			causal = 1
		}
		args = append(args, causal)
	}
	ptrs := make([]unsafe.Pointer, len(args))
	for k := range args {
		ptrs[k] = unsafe.Pointer(&args[k])
	}
	tr := (t.N + req.Br - 1) / req.Br
	launch := func() error { return fn.Launch(tr, bh, 1, req.Br, 1, 1, 0, cu.NoStream, ptrs) }
	if err := launch(); err != nil {
		return 0, fmt.Errorf("launching your kernel: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return 0, fmt.Errorf("your kernel failed on the GPU: %w", err)
	}
	start, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&start)
	stop, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&stop)
	var times []float64
	for range t.Repeats {
		if err := start.Record(cu.NoStream); err != nil {
			return 0, err
		}
		if err := launch(); err != nil {
			return 0, err
		}
		if err := stop.Record(cu.NoStream); err != nil {
			return 0, err
		}
		if err := cu.Synchronize(); err != nil {
			return 0, fmt.Errorf("your kernel failed on the GPU: %w", err)
		}
		ms, err := start.Elapsed(stop)
		if err != nil {
			return 0, err
		}
		times = append(times, float64(ms))
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// setHarness points the harness's globals at this launch's record buffers
// (0: records off) and sizes.
func setHarness(mod cu.Module, steps, outs, stray cu.DevicePtr, tc, n int) error {
	for _, g := range []struct {
		name  string
		value uint64
		bytes int64
	}{{"fs_steps", uint64(steps), 8}, {"fs_outs", uint64(outs), 8}, {"fs_stray", uint64(stray), 8}, {"fs_tc", uint64(tc), 4}, {"fs_n", uint64(n), 4}} {
		p, size, err := mod.Global(g.name)
		if err != nil || size != g.bytes {
			return fmt.Errorf("the harness's %s is missing (did your source redefine it?)", g.name)
		}
		if err := cu.MemcpyHtoD(p, unsafe.Pointer(&g.value), g.bytes); err != nil {
			return err
		}
	}
	return nil
}
