//go:build gpu

package main

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

// cu has no wrapper for cuFuncSetAttribute: without it a kernel cannot use
// more than 48 KB of dynamic shared memory.
static CUresult fs_set_max_dynamic_shared(CUfunction f, int bytes) {
	return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

static CUresult fs_shared_optin(CUdevice d, int *bytes) {
	return cuDeviceGetAttribute(bytes, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d);
}

// fs_launch launches f with params, each a pointer to the parameter's
// bytes in C memory.
static CUresult fs_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned threads, unsigned shared,
                          void **params) {
	return cuLaunchKernel(f, gx, gy, gz, threads, 1, 1, shared, 0, params, 0);
}

// cuTensorMapEncodeTiled (CUDA 12.0) is newer than the cuda.h the worker is
// built against (Debian's 11.8): it is taken from the driver at run time,
// through this prototype, with its enums passed as their values.
typedef CUresult (*fs_encode_tiled_fn)(void *tensorMap, int dataType, cuuint32_t rank, void *globalAddress,
                                       const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                       const cuuint32_t *boxDim, const cuuint32_t *elementStrides, int interleave,
                                       int swizzle, int l2Promotion, int oobFill);
static fs_encode_tiled_fn fs_encode_tiled;

static CUresult fs_find_encode_tiled(void) {
	void *fn = 0;
#if CUDA_VERSION >= 12000
	CUresult r = cuGetProcAddress("cuTensorMapEncodeTiled", &fn, 12000, 0, 0);
#else
	CUresult r = cuGetProcAddress("cuTensorMapEncodeTiled", &fn, 12000, 0);
#endif
	if (r == CUDA_SUCCESS && fn == 0) r = CUDA_ERROR_NOT_FOUND;
	if (r == CUDA_SUCCESS) fs_encode_tiled = (fs_encode_tiled_fn)fn;
	return r;
}

// fs_encode_bf16_panels encodes into map (128 bytes, 64-byte aligned) a bf16
// tensor of d columns × n rows × bh batch-heads at addr, copied in boxes of
// cols × rows of one batch-head with the 128-byte swizzle; out-of-bounds
// rows read as zeros (kernels.TensorMap, kernels/cuda/hopper/tma.cuh).
static CUresult fs_encode_bf16_panels(void *map, CUdeviceptr addr, cuuint64_t d, cuuint64_t n, cuuint64_t bh,
                                      cuuint32_t cols, cuuint32_t rows) {
	const cuuint64_t dims[3] = {d, n, bh};
	const cuuint64_t strides[2] = {d * 2, d * n * 2}; // bytes from one row, and one batch-head, to the next
	const cuuint32_t box[3] = {cols, rows, 1};
	const cuuint32_t elementStrides[3] = {1, 1, 1};
	enum { BFLOAT16 = 9, INTERLEAVE_NONE = 0, SWIZZLE_128B = 3, L2_PROMOTION_128B = 2, OOB_FILL_ZEROS = 0 };
	if (!fs_encode_tiled) return CUDA_ERROR_NOT_FOUND;
	return fs_encode_tiled(map, BFLOAT16, 3, (void *)addr, dims, strides, box, elementStrides, INTERLEAVE_NONE,
	                       SWIZZLE_128B, L2_PROMOTION_128B, OOB_FILL_ZEROS);
}

// fs_encode_f32_add encodes into map a float32 tensor of d columns × n
// rows × bh batch-heads at addr that the copy engine adds boxes of cols ×
// rows of one batch-head into, from shared memory with the 128-byte
// swizzle; rows past n are not written (kernels.TensorMap's Add form).
static CUresult fs_encode_f32_add(void *map, CUdeviceptr addr, cuuint64_t d, cuuint64_t n, cuuint64_t bh,
                                  cuuint32_t cols, cuuint32_t rows) {
	const cuuint64_t dims[3] = {d, n, bh};
	const cuuint64_t strides[2] = {d * 4, d * n * 4};
	const cuuint32_t box[3] = {cols, rows, 1};
	const cuuint32_t elementStrides[3] = {1, 1, 1};
	enum { FLOAT32 = 7, INTERLEAVE_NONE = 0, SWIZZLE_128B = 3, L2_PROMOTION_128B = 2, OOB_FILL_ZEROS = 0 };
	if (!fs_encode_tiled) return CUDA_ERROR_NOT_FOUND;
	return fs_encode_tiled(map, FLOAT32, 3, (void *)addr, dims, strides, box, elementStrides, INTERLEAVE_NONE,
	                       SWIZZLE_128B, L2_PROMOTION_128B, OOB_FILL_ZEROS);
}

// fs_encode_f32_run encodes into map a float32 vector of n values at addr,
// copied in boxes of box values, unswizzled; values past its end read as
// zeros (kernels.TensorMap's Run form).
static CUresult fs_encode_f32_run(void *map, CUdeviceptr addr, cuuint64_t n, cuuint32_t box) {
	const cuuint64_t dims[1] = {n};
	const cuuint32_t boxDim[1] = {box};
	const cuuint32_t elementStrides[1] = {1};
	// A rank-1 map has no strides, but the driver refuses a null array
	// (CUDA error 1 on an H200, driver 580): one unread stride.
	const cuuint64_t noStrides[1] = {n * 4};
	enum { FLOAT32 = 7, INTERLEAVE_NONE = 0, SWIZZLE_NONE = 0, L2_PROMOTION_NONE = 0, OOB_FILL_ZEROS = 0 };
	if (!fs_encode_tiled) return CUDA_ERROR_NOT_FOUND;
	return fs_encode_tiled(map, FLOAT32, 1, (void *)addr, dims, noStrides, boxDim, elementStrides, INTERLEAVE_NONE,
	                       SWIZZLE_NONE, L2_PROMOTION_NONE, OOB_FILL_ZEROS);
}
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"flashstep/kernels"
	"flashstep/kernels/ptx"
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
	// keepGradients: a traced backward run also reads back the dQ, dK
	// and dV its kernels wrote to device memory (gpuTrace.gradients), for
	// the tests to hold them to the trace's.
	keepGradients bool
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
	h.PTXHash = ptx.Hash()
	// Without cuTensorMapEncodeTiled (a driver older than CUDA 12) the
	// rungs that copy by TMA cannot run; the rest can.
	encodeErr := C.fs_find_encode_tiled()
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
		if encodeErr != 0 && kernels.ModuleUsesTMA(m) {
			d.unavailable[m] = fmt.Errorf("needs cuTensorMapEncodeTiled, which this driver does not have (CUDA error %d): a driver for CUDA 12 or newer", int(encodeErr))
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
var modulePTX = ptx.Text

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

// cfunc is fn's CUfunction handle: cu.Function is a struct holding only it.
func cfunc(fn cu.Function) C.CUfunction {
	if unsafe.Sizeof(fn) != unsafe.Sizeof(C.CUfunction(nil)) {
		panic("gorgonia.org/cu changed its Function layout")
	}
	return *(*C.CUfunction)(unsafe.Pointer(&fn))
}

func setMaxDynamicShared(fn cu.Function, bytes int) error {
	if r := C.fs_set_max_dynamic_shared(cfunc(fn), C.int(bytes)); r != 0 {
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

// kernelParam is one argument of a launch: an 8-byte value, or the
// parameter's whole bytes in C memory (a 128-byte tensor map).
type kernelParam struct {
	value uint64
	bytes unsafe.Pointer
}

// launchKernel launches fn on the default stream. cu's Function.Launch
// copies 8 bytes of each parameter, which a tensor map is not, so the
// worker hands the driver its parameters itself: a C array of pointers,
// each to its parameter's bytes in C memory, which cuLaunchKernel copies
// before it returns.
func launchKernel(fn cu.Function, grid [3]int, threads, shared int, params []kernelParam) error {
	n := len(params)
	mem := C.malloc(C.size_t(16 * max(n, 1))) // n pointers, then n 8-byte values
	defer C.free(mem)
	ptrs := unsafe.Slice((*unsafe.Pointer)(mem), n)
	vals := unsafe.Slice((*uint64)(unsafe.Add(mem, 8*n)), n)
	for i, p := range params {
		if p.bytes != nil {
			ptrs[i] = p.bytes
			continue
		}
		vals[i] = p.value
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	if r := C.fs_launch(cfunc(fn), C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]), C.uint(threads), C.uint(shared), (*unsafe.Pointer)(mem)); r != 0 {
		return fmt.Errorf("cuLaunchKernel: CUDA error %d", int(r))
	}
	return nil
}

// hostAlloc is bytes of zeroed C memory aligned to align (a power of two);
// hostFree gives it back.
func hostAlloc(bytes, align int) unsafe.Pointer {
	p := C.aligned_alloc(C.size_t(align), C.size_t((bytes+align-1)/align*align))
	if p == nil {
		panic("out of host memory")
	}
	C.memset(p, 0, C.size_t(bytes))
	return p
}

func hostFree(p unsafe.Pointer) { C.free(p) }

// encodeTensorMap writes m of the buffer at addr into dst, 128 bytes
// aligned to 64.
func encodeTensorMap(dst unsafe.Pointer, m *kernels.TensorMap, addr cu.DevicePtr) error {
	if m.Run {
		if r := C.fs_encode_f32_run(dst, C.CUdeviceptr(addr), C.cuuint64_t(m.N*m.BH), C.cuuint32_t(m.Rows)); r != 0 {
			return fmt.Errorf("cuTensorMapEncodeTiled (a run of %d float32, box %d): CUDA error %d", m.N*m.BH, m.Rows, int(r))
		}
		return nil
	}
	if m.Add {
		if r := C.fs_encode_f32_add(dst, C.CUdeviceptr(addr), C.cuuint64_t(m.D), C.cuuint64_t(m.N), C.cuuint64_t(m.BH),
			C.cuuint32_t(kernels.TensorMapAddCols), C.cuuint32_t(m.Rows)); r != 0 {
			return fmt.Errorf("cuTensorMapEncodeTiled (float32 %d×%d×%d to add into, box %d×%d): CUDA error %d", m.D, m.N, m.BH, kernels.TensorMapAddCols, m.Rows, int(r))
		}
		return nil
	}
	if r := C.fs_encode_bf16_panels(dst, C.CUdeviceptr(addr), C.cuuint64_t(m.D), C.cuuint64_t(m.N), C.cuuint64_t(m.BH),
		C.cuuint32_t(kernels.TensorMapBoxCols), C.cuuint32_t(m.Rows)); r != 0 {
		return fmt.Errorf("cuTensorMapEncodeTiled (%d×%d×%d, box %d×%d): CUDA error %d", m.D, m.N, m.BH, kernels.TensorMapBoxCols, m.Rows, int(r))
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
