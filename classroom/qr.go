package classroom

import (
	"bytes"
	"fmt"
	"image/color"

	"github.com/boombuler/barcode/qr"
)

// qrSVG draws text as a QR code in SVG: one path of unit squares, with the
// four-module quiet zone the standard asks for, so a phone reads it off a
// projector at any size. Error correction M survives a washed-out beam.
func qrSVG(text string) ([]byte, error) {
	code, err := qr.Encode(text, qr.M, qr.Auto)
	if err != nil {
		return nil, fmt.Errorf("QR code of %q: %w", text, err)
	}
	n := code.Bounds().Dx()
	const quiet = 4
	size := n + 2*quiet
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" shape-rendering="crispEdges">`, size, size)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, size, size)
	for y := range n {
		for x := range n {
			if isDark(code.At(x, y)) {
				fmt.Fprintf(&b, "M%d %dh1v1h-1z", x+quiet, y+quiet)
			}
		}
	}
	b.WriteString(`"/></svg>`)
	return b.Bytes(), nil
}

func isDark(c color.Color) bool {
	r, g, bl, _ := c.RGBA()
	return r+g+bl < 3*0x8000
}
