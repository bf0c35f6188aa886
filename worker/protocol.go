// Package worker owns the protocol between the server and the GPU worker
// process (cmd/gpuworker): frames over a pair of pipes the server hands the
// worker as file descriptors 3 (requests) and 4 (replies). Never stdout: the
// CUDA library and device printf write there.
//
// A frame is a little-endian uint32 length L, then L bytes: a type byte and
// the payload. Control messages are JSON; trace bytes travel raw.
//
//	worker → server  Hello  once, at start-up: the GPU and its kernels
//	server → worker  Run    a configuration to run, traced
//	worker → server  Chunk  trace bytes: the header alone, then whole records
//	worker → server  Done   the run finished; its trace has been sent
//	worker → server  Fail   the run failed; Fatal: the worker exits after it
//	server → worker  Bench  time a run, untraced
//	worker → server  Timed  its times and device memory
//
// A worker that cannot find a GPU exits before Hello.
package worker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Type is a frame's kind.
type Type uint8

const (
	TypeHello Type = 1
	TypeRun   Type = 2
	TypeChunk Type = 3
	TypeDone  Type = 4
	TypeFail  Type = 5
	TypeBench Type = 6
	TypeTimed Type = 7
)

func (t Type) String() string {
	switch t {
	case TypeHello:
		return "hello"
	case TypeRun:
		return "run"
	case TypeChunk:
		return "chunk"
	case TypeDone:
		return "done"
	case TypeFail:
		return "fail"
	case TypeBench:
		return "bench"
	case TypeTimed:
		return "timed"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// MaxFrame bounds a frame: the largest is one inputs record of the largest
// configuration (3·N·d floats).
const MaxFrame = 64 << 20

// File descriptors of the worker's side of the pipes.
const (
	RequestFD = 3
	ReplyFD   = 4
)

// ExitNoGPU is the worker's exit status when it finds no usable GPU.
const ExitNoGPU = 3

// ErrProtocol wraps every malformed frame.
var ErrProtocol = errors.New("worker protocol")

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, t Type, payload []byte) error {
	if len(payload)+1 > MaxFrame {
		return fmt.Errorf("%w: %s frame of %d bytes, above %d", ErrProtocol, t, len(payload)+1, MaxFrame)
	}
	var head [5]byte
	binary.LittleEndian.PutUint32(head[:4], uint32(len(payload)+1))
	head[4] = byte(t)
	if _, err := w.Write(head[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// WriteJSON writes a control message.
func WriteJSON(w io.Writer, t Type, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteFrame(w, t, b)
}

// ReadFrame reads one frame. io.EOF means the peer closed between frames.
func ReadFrame(r io.Reader) (Type, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:4]); err != nil {
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(head[:4])
	if n < 1 || n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: frame length %d", ErrProtocol, n)
	}
	if _, err := io.ReadFull(r, head[4:5]); err != nil {
		return 0, nil, unexpected(err)
	}
	t := Type(head[4])
	if t < TypeHello || t > TypeTimed {
		return 0, nil, fmt.Errorf("%w: unknown frame type %d", ErrProtocol, head[4])
	}
	payload := make([]byte, n-1)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, unexpected(err)
	}
	return t, payload, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Hello describes the worker's GPU and its kernels as loaded.
type Hello struct {
	GPU         string   `json:"gpu"`    // the device's name
	Driver      string   `json:"driver"` // the NVIDIA driver release
	CUDA        int      `json:"cuda"`   // the driver's CUDA version, e.g. 13000
	SMs         int      `json:"sms"`    // multiprocessors
	SMIDs       int      `json:"smids"`  // %nsmid: the range of %smid
	TimerTickNs float64  `json:"timer_tick_ns"`
	MemoryBytes int64    `json:"memory_bytes"`
	PTXHash     string   `json:"ptx_hash"`
	Kernels     []Kernel `json:"kernels"`
}

// Kernel is what the driver reports of one loaded kernel (cuFuncGetAttribute):
// the JIT log is empty when the driver's cache hits, these are not.
type Kernel struct {
	Module       string `json:"module"`
	Name         string `json:"name"`
	Registers    int    `json:"registers"`
	LocalBytes   int    `json:"local_bytes"` // per thread: spills and local arrays
	StaticShared int    `json:"static_shared_bytes"`
	MaxThreads   int    `json:"max_threads"`
}

// Run asks for one traced run.
type Run struct {
	ID    uint64 `json:"id"`
	Query string `json:"query"` // kernels.Config in URL form
}

// Done ends a run's chunks.
type Done struct {
	ID       uint64  `json:"id"`
	KernelMs float64 `json:"kernel_ms"` // the traced launches, by CUDA events
	Records  int     `json:"records"`
}

// Fail says a run could not be done. Fatal means the worker's CUDA context is
// unusable and the worker exits after this message.
type Fail struct {
	ID    uint64 `json:"id"`
	Error string `json:"error"`
	Fatal bool   `json:"fatal"`
}

// Bench asks for the timing of one run of the untraced kernels, on fresh
// inputs. Its shape is given field by field: benchmark shapes go past the
// traced stepper's limits.
type Bench struct {
	ID      uint64 `json:"id"`
	Variant string `json:"variant"`
	N       int    `json:"n"`
	D       int    `json:"d"`
	Br      int    `json:"br"`
	Bc      int    `json:"bc"`
	Batch   int    `json:"batch"`
	Heads   int    `json:"heads"`
	Causal  bool   `json:"causal"`
	Seed    uint64 `json:"seed"`
	Repeats int    `json:"repeats"`
}

// Timed answers Bench: the milliseconds of each repeat (CUDA events, after a
// warm-up), and the device memory the run took: free memory before its
// buffers were allocated, after, and after they were freed again.
type Timed struct {
	ID         uint64    `json:"id"`
	Ms         []float64 `json:"ms"`
	FreeBefore int64     `json:"free_before"`
	FreeInUse  int64     `json:"free_in_use"`
	FreeAfter  int64     `json:"free_after"`
	OutOfMem   bool      `json:"out_of_memory"`
	Error      string    `json:"error,omitempty"`
}
