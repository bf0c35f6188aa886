package launch

import (
	"fmt"
	"net/url"
	"strings"

	"flashstep/instrument"
	"flashstep/kernels"
)

// The checks that the compiled kernels run a configuration.

// Tiles lists, for a form or an error, the tiles (Br×Bc, d) the GPU runs
// variant v at; nil for a rung that runs any tile its limits allow.
func Tiles(v instrument.Variant) []string {
	info := kernels.Info(v)
	if info == nil {
		return nil
	}
	var s []string
	for _, t := range info.Tiles {
		s = append(s, t.String())
	}
	return s
}

// MaxGPUElements bounds batch·heads·N·d of a GPU run: unlike the mirror, the
// GPU computes every batch-head, traced or not, and the worker draws all
// their inputs. 2²⁶ is four times the FlashAttention benchmark shapes
// (B·N = 16384, H·d = 2048).
const MaxGPUElements = 1 << 26

// MaxGridY is CUDA's limit on a grid's second and third dimensions, where
// the kernels put the batch-heads; MaxSharedBytes what a block may opt into
// on the reference GPU (H100).
const (
	MaxGridY       = kernels.MaxGridY
	MaxSharedBytes = kernels.MaxSharedBytes
)

// MaxOffsetBytes bounds the table of trace offsets a run that lays out a
// trace (a traced run, or a timing run) uploads: 8 bytes per trace slot (a
// block's, or a record's) of the whole grid, whatever the selection traces.
// An untraced run uploads none.
const MaxOffsetBytes = 128 << 20

// Validate checks that the compiled kernels run c, traced or not, beyond
// what c.Validate checks: its tiles are compiled (or its rung's limits allow
// them), and its grid fits. A run that lays out a trace is held to
// ValidateTraced. The error is kernels.FieldErrors.
func Validate(c *kernels.Config) error {
	if c.Batch < 1 || c.Heads < 1 || c.N < 1 || c.D < 1 || c.Br < 1 || c.Bc < 1 {
		return kernels.FieldErrors{{Field: kernels.FieldN, Message: "every size must be positive"}}
	}
	info := kernels.Info(c.Variant)
	if info == nil {
		return kernels.FieldErrors{{Field: kernels.FieldVariant, Message: fmt.Sprintf("no GPU kernel for variant %v", c.Variant)}}
	}
	if n := int64(c.Batch) * int64(c.Heads) * int64(c.N) * int64(c.D); n > MaxGPUElements {
		return kernels.FieldErrors{{Field: kernels.FieldHeads, Message: fmt.Sprintf("the GPU computes every batch-head: batch·heads·N·d must be at most %d (got %d)", MaxGPUElements, n)}}
	}
	if bh := c.Batch * c.Heads; bh > MaxGridY {
		return kernels.FieldErrors{{Field: kernels.FieldHeads, Message: fmt.Sprintf("the kernels give each batch-head its own row of the grid: batch·heads must be at most %d (got %d)", MaxGridY, bh)}}
	}
	if info.GPULimits != nil {
		if err := info.GPULimits(c); err != nil {
			return err
		}
	}
	if info.Tiles != nil {
		if _, ok := info.TileFor(c); !ok {
			return kernels.FieldErrors{{Field: kernels.FieldBr, Message: fmt.Sprintf("the GPU runs %s with these compiled tiles (Br×Bc, d): %s; not %d×%d with d=%d",
				c.Variant, strings.Join(Tiles(c.Variant), "; "), c.Br, c.Bc, c.D)}}
		}
	}
	return nil
}

// ValidateTraced is Validate for a run that lays out a trace, a traced run
// or a timing run (ForTrace): its table of trace offsets must fit too.
func ValidateTraced(c *kernels.Config) error {
	if err := Validate(c); err != nil {
		return err
	}
	return validateOffsets(c)
}

// validateOffsets checks the size of the offset tables a trace of c
// uploads, for a c that passed Validate.
func validateOffsets(c *kernels.Config) error {
	if b := offsetBytes(c); b > MaxOffsetBytes {
		what := "block"
		if ts := kernels.Info(c.Variant).TraceSlots; ts != nil && ts.Count != nil {
			what = "record"
		}
		return kernels.FieldErrors{{Field: kernels.FieldBatch, Message: fmt.Sprintf("a traced GPU run uploads an 8-byte trace offset for every %s of the whole grid, %s here; at most %s: fewer batch-heads, or larger tiles",
			what, kernels.FormatBytes(b), kernels.FormatBytes(MaxOffsetBytes))}}
	}
	return nil
}

// ParseBenchConfig reads a configuration for an untraced GPU run: the
// stepper's limits (which bound a trace) do not apply, the GPU's do.
func ParseBenchConfig(v url.Values) (kernels.Config, error) {
	c, err := kernels.ParseBenchFields(v)
	if err != nil {
		return c, err
	}
	return c, Validate(&c)
}
