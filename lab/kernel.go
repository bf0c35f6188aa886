package lab

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"flashstep/instrument"
	"flashstep/kernels"
)

// The kernel track: a student's CUDA kernel, compiled at run time (NVRTC)
// and run by the GPU worker in a process of its own (gpuworker -lab), one
// process per submission, so that a kernel that faults, traps or never ends
// takes only its own process down. The server sends a KernelRequest on the
// process's standard input and reads its answer on a channel of its own,
// descriptor ReplyFD: Progress lines as the process moves from stage to
// stage, then one KernelReply. Its standard output is left to the
// student's threads, whose printf is shown with the verdict.

// Limits of a submission, named in the error a student gets.
const (
	MaxSourceBytes = 64 << 10 // the source
	MaxLogBytes    = 16 << 10 // the compiler's log kept for the page
	MaxOutputBytes = 8 << 10  // what the kernel's threads print, kept for the page
)

// ReplyFD is the descriptor on which the kernel's process answers.
const ReplyFD = 3

// Progress is a line the kernel's process writes on ReplyFD as it enters
// a stage ("compile", "load", "run"): a process that dies without a reply
// is known to have died there (a compiler that overflows its stack).
type Progress struct {
	Progress string `json:"progress"`
}

// KernelRequest is one submission: the source, the tile it is compiled at
// (FS_BR, FS_BC, FS_D), whether its kernel takes the causal flag, and the
// runs to launch it on, each in the stepper's URL form.
type KernelRequest struct {
	Source string   `json:"source"`
	Br     int      `json:"br"`
	Bc     int      `json:"bc"`
	D      int      `json:"d"`
	Causal bool     `json:"causal"` // the kernel's signature ends with int causal
	Runs   []string `json:"runs"`
	// Timing, instead of Runs: time the kernel at a size the ladder's rungs
	// are timed at, records off.
	Timing *Timing `json:"timing,omitempty"`
	// NoFMA compiles with --fmad=false: every multiply and add rounded on
	// its own, as the ladder's float32 rungs do (NVRTC fuses them into
	// FMAs by default).
	NoFMA bool `json:"no_fma,omitempty"`
}

// Timing is a timed launch's size: N, batch and heads (at the request's
// head dim), masked or not; the reply's TimedMs is the median of Repeats
// launches after one to warm up.
type Timing struct {
	N, Batch, Heads int
	Causal          bool
	Repeats         int
}

// KernelReply is what the process answers. Stage is where it stopped:
// "compile" (Log says why), "load", "run" (Error says why), or "done".
type KernelReply struct {
	Stage   string      `json:"stage"`
	Log     string      `json:"log,omitempty"`
	Error   string      `json:"error,omitempty"`
	Runs    []KernelRun `json:"runs,omitempty"`
	TimedMs float64     `json:"timed_ms,omitempty"`
	// Crash, at stage "compile": the compiler stopped without a message
	// of its own, said in the student's words.
	Crash string `json:"crash,omitempty"`
	// Sandbox is what confined the process, as it found it (package
	// sandbox's report): the server logs it, the GPU tests check it.
	Sandbox string `json:"sandbox,omitempty"`
}

// KernelRun is one launch's results: every record the student's threads
// made (fs_record_step, fs_record_out), and what the kernel wrote to O and
// the LSE.
type KernelRun struct {
	Ms    float64    `json:"ms"`
	Steps []StepSeen `json:"steps"`
	Outs  []OutSeen  `json:"outs"`
	O     Floats     `json:"o"`
	LSE   Floats     `json:"lse"`
	// Stray counts records made with a kv-tile outside 0…Tc−1, or from a
	// thread past the q-tile's rows, which the harness drops.
	Stray int `json:"stray"`
}

// StepSeen is one thread's fs_record_step: row R of q-tile I of batch-head
// BH after kv-tile J.
type StepSeen struct {
	BH, I, J, R int
	M, L        Float
	O           Floats
}

// OutSeen is one thread's fs_record_out: sequence row Row of batch-head BH.
type OutSeen struct {
	BH, Row int
	O       Floats
	LSE     Float
}

// Float and Floats cross the pipe as their bits: a student's kernel may
// well write −∞ or NaN, which JSON's numbers cannot hold.
type (
	Float  float32
	Floats []float32
)

func (f Float) MarshalJSON() ([]byte, error) {
	return strconv.AppendUint(nil, uint64(math.Float32bits(float32(f))), 10), nil
}

func (f *Float) UnmarshalJSON(b []byte) error {
	bits, err := strconv.ParseUint(string(b), 10, 32)
	*f = Float(math.Float32frombits(uint32(bits)))
	return err
}

func (fs Floats) MarshalJSON() ([]byte, error) {
	raw := make([]byte, 4*len(fs))
	for k, f := range fs {
		binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(f))
	}
	return json.Marshal(raw) // base64
}

func (fs *Floats) UnmarshalJSON(b []byte) error {
	var raw []byte
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw)%4 != 0 {
		return fmt.Errorf("%d bytes of floats", len(raw))
	}
	*fs = make([]float32, len(raw)/4)
	for k := range *fs {
		(*fs)[k] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:]))
	}
	return nil
}

// Harness is the code compiled before a student's source: the tile sizes
// and the record functions, which write into buffers the harness owns.
func Harness(br, bc, d int) string {
	return fmt.Sprintf(harnessHeader, br, bc, d)
}

// The harness ends with #line 1 "student.cu": the compiler's messages
// name the student's own lines.

const harnessHeader = `#define FS_BR %d
#define FS_BC %d
#define FS_D %d
#define INFINITY __int_as_float(0x7f800000)
struct fs_step_slot { float m, l; int set, pad; float o[FS_D]; };
struct fs_out_slot { float lse; int set; float o[FS_D]; };
__device__ fs_step_slot *fs_steps;
__device__ fs_out_slot *fs_outs;
__device__ int fs_tc, fs_n, *fs_stray;
__device__ void fs_record_step(int j, float m, float l, const float *o) {
  if (!fs_steps) return; // a timed launch records nothing
  const int r = threadIdx.x;
  if (j < 0 || j >= fs_tc || r >= FS_BR) { atomicAdd(fs_stray, 1); return; }
  fs_step_slot *s = &fs_steps[(((size_t)blockIdx.y * gridDim.x + blockIdx.x) * fs_tc + j) * FS_BR + r];
  s->m = m; s->l = l; s->set = 1;
  for (int x = 0; x < FS_D; x++) s->o[x] = o[x];
}
__device__ void fs_record_out(const float *o, float lse) {
  if (!fs_outs) return;
  const int row = blockIdx.x * FS_BR + threadIdx.x;
  if (threadIdx.x >= FS_BR || row >= fs_n) { atomicAdd(fs_stray, 1); return; }
  fs_out_slot *s = &fs_outs[(size_t)blockIdx.y * fs_n + row];
  s->lse = lse; s->set = 1;
  for (int x = 0; x < FS_D; x++) s->o[x] = o[x];
}
#line 1 "student.cu"
`

// KernelRequestFor is the request that runs source for exercise e: the
// exercise's own run first, then hidden random runs from seed (ragged N,
// several heads, masked and not where the kernel takes the flag), at the
// exercise's tile.
func (e *Exercise) KernelRequestFor(source string, seed uint64) (KernelRequest, []kernels.Config) {
	runs := append([]kernels.Config{e.Run}, e.HiddenRuns(seed)...)
	req := KernelRequest{Source: source, Br: e.Run.Br, Bc: e.Run.Bc, D: e.Run.D, Causal: e.CausalFlag}
	for _, c := range runs {
		req.Runs = append(req.Runs, c.Values().Encode())
	}
	return req, runs
}

// HiddenRuns are three random runs at the exercise's tile: N from 17 to
// 150 (rarely a multiple of the tile), one to three heads in one or two
// batches, each with its own inputs.
func (e *Exercise) HiddenRuns(seed uint64) []kernels.Config {
	rng := rand.New(rand.NewPCG(seed, 0x1ab))
	var out []kernels.Config
	for k := range 3 {
		c := e.Run
		c.N = 17 + rng.IntN(134)
		c.Batch, c.Heads = 1+rng.IntN(2), 1+rng.IntN(3)
		c.Seed = rng.Uint64() >> 1
		c.Causal = e.CausalFlag && k != 1
		c.Pattern = []instrument.Pattern{instrument.PatternNormal, instrument.PatternPeaked, instrument.PatternLarge}[k]
		c.TraceBH, c.TraceQ = instrument.Range{}, instrument.Range{}
		out = append(out, c)
	}
	return out
}

// TimingFor is the timed request for source: the ladder's size (N = 4096,
// B·N = 16384, H·d = 2048) at d = 64 and 64×64 tiles, masked if the
// exercise's kernel takes the flag; the FLOPs of that launch.
func (e *Exercise) TimingFor(source string) (KernelRequest, float64) {
	const n, d = 4096, 64
	t := &Timing{N: n, Batch: 16384 / n, Heads: 2048 / d, Causal: e.CausalFlag, Repeats: 3}
	flops := 4 * float64(t.Batch*t.Heads) * n * n * d
	if t.Causal {
		flops /= 2
	}
	return KernelRequest{Source: source, Br: 64, Bc: 64, D: d, Causal: e.CausalFlag, Timing: t}, flops
}
