//go:build gpu

package main

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

// cu has no wrapper for cuFuncSetAttribute: without it a kernel cannot use
// more than 48 KB of dynamic shared memory.
static CUresult fs_set_max_dynamic_shared(CUfunction f, int bytes) {
	return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

static CUresult fs_shared_optin(CUdevice d, int *bytes) {
	return cuDeviceGetAttribute(bytes, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d);
}
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/worker"

	"gorgonia.org/cu"
)

// device is the GPU as the worker holds it. Every method must be called from
// the OS thread that opened it: a CUDA context is current on one thread.
type device struct {
	dev       cu.Device
	ctx       cu.CUContext
	hello     worker.Hello
	fns       map[string]cu.Function // "module/kernel"
	sharedMax int                    // dynamic shared memory a block may opt into
	// unavailable holds, for each module this GPU cannot run (a Hopper
	// rung's on another architecture), why not; the rest work.
	unavailable map[string]error
}

func openDevice() (*device, error) {
	n, err := cu.NumDevices()
	if err != nil || n == 0 {
		return nil, fmt.Errorf("no CUDA device (%v)", err)
	}
	d := &device{fns: map[string]cu.Function{}, unavailable: map[string]error{}}
	if d.dev, err = cu.GetDevice(0); err != nil {
		return nil, err
	}
	if d.ctx, err = d.dev.MakeContext(cu.SchedAuto); err != nil {
		return nil, fmt.Errorf("creating a CUDA context: %w", err)
	}
	h := &d.hello
	if h.GPU, err = d.dev.Name(); err != nil {
		return nil, err
	}
	h.Driver = driverRelease()
	h.CUDA = cu.Version()
	if h.SMs, err = d.dev.Attribute(cu.MultiprocessorCount); err != nil {
		return nil, err
	}
	if h.MemoryBytes, err = d.dev.TotalMem(); err != nil {
		return nil, err
	}
	var optin C.int
	if r := C.fs_shared_optin(C.CUdevice(d.dev), &optin); r != 0 {
		return nil, fmt.Errorf("reading the shared memory opt-in: CUDA error %d", int(r))
	}
	d.sharedMax = int(optin)
	h.PTXHash = kernels.PTXHash()
	major, err := d.dev.Attribute(cu.ComputeCapabilityMajor)
	if err != nil {
		return nil, err
	}
	minor, err := d.dev.Attribute(cu.ComputeCapabilityMinor)
	if err != nil {
		return nil, err
	}
	for _, m := range kernels.Modules {
		if err := kernels.ModuleArch(m).Runs(major, minor); err != nil {
			d.unavailable[m] = err
			continue
		}
		if err := d.load(m); err != nil {
			return nil, err
		}
	}
	if err := d.probe(); err != nil {
		return nil, err
	}
	return d, nil
}

// driverRelease is the NVIDIA driver's release, as the kernel module reports
// it; cu only knows the CUDA version.
func driverRelease() string {
	b, err := os.ReadFile("/proc/driver/nvidia/version")
	if err != nil {
		return fmt.Sprintf("CUDA %d", cu.Version())
	}
	// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..."
	for _, f := range strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) {
		if strings.Count(f, ".") >= 1 && f[0] >= '0' && f[0] <= '9' {
			return f
		}
	}
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
}

// modulePTX is the module the worker loads: the committed PTX. The GPU
// benchmarks swap in other builds of the same source (-ptx-dir), to
// measure what the compiler that made the PTX is worth.
var modulePTX = kernels.PTX

// load JIT-compiles one PTX module, opts every kernel into the shared memory
// it may need, and records what the driver reports of each.
func (d *device) load(module string) error {
	ptx, err := modulePTX(module)
	if err != nil {
		return err
	}
	mod, err := cu.LoadData(ptx)
	if err != nil {
		return fmt.Errorf("loading %s.ptx: %w", module, err)
	}
	names := launch.Kernels()[module]
	for _, name := range names {
		fn, err := mod.Function(name)
		if err != nil {
			return fmt.Errorf("%s.ptx has no kernel %s: %w", module, name, err)
		}
		k := worker.Kernel{Module: module, Name: name}
		for _, a := range []struct {
			attr cu.FunctionAttribute
			dst  *int
		}{{cu.NumRegs, &k.Registers}, {cu.LocalSizeBytes, &k.LocalBytes}, {cu.SharedSizeBytes, &k.StaticShared}, {cu.FnMaxThreadsPerBlock, &k.MaxThreads}} {
			if *a.dst, err = fn.Attribute(a.attr); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if err := setMaxDynamicShared(fn, d.sharedMax-k.StaticShared); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		d.fns[module+"/"+name] = fn
		d.hello.Kernels = append(d.hello.Kernels, k)
	}
	return nil
}

func setMaxDynamicShared(fn cu.Function, bytes int) error {
	// cu.Function is a struct holding only the CUfunction handle.
	if unsafe.Sizeof(fn) != unsafe.Sizeof(C.CUfunction(nil)) {
		panic("gorgonia.org/cu changed its Function layout")
	}
	h := *(*C.CUfunction)(unsafe.Pointer(&fn))
	if r := C.fs_set_max_dynamic_shared(h, C.int(bytes)); r != 0 {
		return fmt.Errorf("cuFuncSetAttribute(max dynamic shared = %d): CUDA error %d", bytes, int(r))
	}
	return nil
}

// probe runs fs_probe: the SM id range and the global timer's resolution.
func (d *device) probe() error {
	out, err := cu.MemAlloc(3 * 8)
	if err != nil {
		return err
	}
	defer cu.MemFree(out)
	args := []unsafe.Pointer{unsafe.Pointer(&out)}
	if err := d.fns[kernels.ProbeModule+"/fs_probe"].Launch(1, 1, 1, 1, 1, 1, 0, cu.NoStream, args); err != nil {
		return fmt.Errorf("probe launch: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	var res [3]uint64
	if err := cu.MemcpyDtoH(unsafe.Pointer(&res[0]), out, 24); err != nil {
		return err
	}
	d.hello.SMIDs = int(res[0])
	if res[2] > 0 {
		d.hello.TimerTickNs = float64(res[1])
	}
	return nil
}

func (d *device) fn(module, name string) (cu.Function, error) {
	f, ok := d.fns[module+"/"+name]
	if err := d.unavailable[module]; err != nil {
		return f, fmt.Errorf("%s %w", strings.TrimSuffix(module, "_traced"), err)
	}
	if !ok {
		return f, fmt.Errorf("no kernel %s in %s", name, module)
	}
	return f, nil
}
