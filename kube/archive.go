package kube

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The conductor's pod hands its report folder back through its log: after
// the run it writes the folder as a gzipped tar, base64 in lines, between
// these two markers. `kube run` and `kube unpack` read it back.
const (
	beginMarker = "planrun-report-begin exit="
	endMarker   = "planrun-report-end sha256="
	lineWidth   = 76
	// maxArchive bounds what a log may make us write (decoded tar size).
	maxArchive = 1 << 30
)

// WriteArchive writes dir's regular files to w as a marked block carrying
// the conductor's exit code.
func WriteArchive(w io.Writer, dir string, exit int) error {
	var raw bytes.Buffer
	gz := gzip.NewWriter(&raw)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("archiving %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	sum := sha256.Sum256(raw.Bytes())
	enc := base64.StdEncoding.EncodeToString(raw.Bytes())
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "\n%s%d\n", beginMarker, exit)
	for len(enc) > 0 {
		n := min(lineWidth, len(enc))
		bw.WriteString(enc[:n])
		bw.WriteByte('\n')
		enc = enc[n:]
	}
	fmt.Fprintf(bw, "%s%s\n", endMarker, hex.EncodeToString(sum[:]))
	return bw.Flush()
}

// Unpacked is what a conductor log carried back.
type Unpacked struct {
	Found bool     // the log held a complete report block
	Exit  int      // the conductor's exit code, when Found
	Files []string // the files written, under the output folder
}

// ReadLog copies a conductor log to pass, line by line, and writes the
// report block it carries into outDir. A log that ends before the block
// is complete gives Found false and no error: the caller decides (the pod
// may have failed before it could write the block).
func ReadLog(r io.Reader, pass io.Writer, outDir string) (Unpacked, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var u Unpacked
	var block *strings.Builder
	exit := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case block == nil && strings.HasPrefix(line, beginMarker):
			n, err := strconv.Atoi(strings.TrimPrefix(line, beginMarker))
			if err != nil {
				return u, fmt.Errorf("conductor log: bad report marker %q", line)
			}
			exit = n
			block = &strings.Builder{}
		case block != nil && strings.HasPrefix(line, endMarker):
			files, err := unpack(block.String(), strings.TrimPrefix(line, endMarker), outDir)
			if err != nil {
				return u, err
			}
			u = Unpacked{Found: true, Exit: exit, Files: append(u.Files, files...)}
			block = nil
		case block != nil:
			block.WriteString(strings.TrimSpace(line))
		default:
			if _, err := fmt.Fprintln(pass, line); err != nil {
				return u, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return u, fmt.Errorf("reading the conductor log: %w", err)
	}
	return u, nil
}

func unpack(b64, wantSum, outDir string) ([]string, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("conductor log: report block is not base64: %w", err)
	}
	sum := sha256.Sum256(raw)
	if hex.EncodeToString(sum[:]) != wantSum {
		return nil, fmt.Errorf("conductor log: report block damaged (checksum differs); the log may have been rotated or cut")
	}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("conductor log: report block: %w", err)
	}
	tr := tar.NewReader(gz)
	var files []string
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return files, fmt.Errorf("conductor log: report block: %w", err)
		}
		name := filepath.FromSlash(h.Name)
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(name) {
			return files, fmt.Errorf("conductor log: report block holds %q, not a plain file inside the report folder", h.Name)
		}
		total += h.Size
		if total > maxArchive {
			return files, fmt.Errorf("conductor log: report block larger than %d bytes", maxArchive)
		}
		path := filepath.Join(outDir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return files, err
		}
		f, err := os.Create(path)
		if err != nil {
			return files, err
		}
		_, err = io.Copy(f, io.LimitReader(tr, h.Size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, fmt.Errorf("writing %s: %w", path, err)
		}
		files = append(files, path)
	}
	return files, nil
}
