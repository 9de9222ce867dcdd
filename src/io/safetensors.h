#pragma once
// Safetensors weights, memory-mapped. A model folder holds either one
// model.safetensors or shards listed by model.safetensors.index.json; tensors
// come back as views into the mapping, never copied. On request
// (WeightResidence::ram) each file is instead copied once into anonymous
// memory backed by 2 MiB pages and the file mapping is dropped: decode streams
// every weight once per token, and huge pages make that stream faster.
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace fathom {

struct StoredTensor {
  std::string dtype;              // as written in the header: "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;
  size_t offset = 0;              // from the start of the file
  size_t nbytes = 0;
  int file = 0;                   // index into the store's mapped files
};

class MappedFile;

enum class WeightResidence {
  mapped,  // views into the page cache (default: no copy, shared between processes)
  ram,     // one private copy on 2 MiB pages (transparent huge pages, madvise)
};

class WeightStore {
 public:
  // Opens DIR/model.safetensors, or the shards named by DIR/model.safetensors.index.json.
  static WeightStore open_folder(const std::string& dir, WeightResidence residence = WeightResidence::mapped);
  // Opens one .safetensors file.
  static WeightStore open_file(const std::string& path, WeightResidence residence = WeightResidence::mapped);

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const StoredTensor& info(const std::string& name) const;
  // A view of the stored bytes (f32, bf16, f16, or u32 codes); throws for other dtypes.
  Tensor get(const std::string& name) const;
  std::vector<std::string> names() const;
  // Sum of all tensor data bytes (what the weights take in memory, mapped or copied).
  int64_t total_bytes() const;
  WeightResidence residence() const { return residence_; }

 private:
  void add_file(const std::string& path);

  WeightResidence residence_ = WeightResidence::mapped;
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::map<std::string, StoredTensor> tensors_;
};

// The tensors of a model folder (model.safetensors or the shards of its index)
// from the headers alone: no tensor data is mapped or read, so a folder whose
// data is truncated or still downloading can be measured. Same checks and
// errors as WeightStore::open_folder for everything a header holds.
std::map<std::string, StoredTensor> read_safetensors_headers(const std::string& dir);

// Writes tensors (f32/bf16/f16/u32) to a .safetensors file; used by tests and tools.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors);

// A .safetensors file written a tensor at a time: the header (every tensor's
// name, dtype and shape, in the order given) goes first, then each tensor's
// bytes in that order, so a writer holds one tensor in memory, not the file.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    size_t nbytes() const;
  };
  SafetensorsWriter(const std::string& path, std::vector<Entry> entries);
  // The next entry's bytes: its dtype and shape must be the entry's.
  void write(const Tensor& t);
  // Checks that every entry was written and the file is complete.
  void finish();
  ~SafetensorsWriter();

 private:
  std::string path_;
  std::vector<Entry> entries_;
  size_t next_ = 0;
  std::unique_ptr<std::ofstream> out_;
};

DType parse_safetensors_dtype(const std::string& name);  // throws for unsupported

// Largest JSON header accepted (the 8-byte length prefix is checked against it
// before anything is parsed or allocated).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t(100) << 20;

// The tensors a safetensors file describes, every field checked against the
// file: `head` is the file's first bytes (at least the 8-byte length and the
// JSON header; the whole file is fine), `file_size` its total size, `source`
// names it in errors. Offsets come back from the start of the file, `file` is
// 0. Throws fathom::Error naming the tensor and field for anything malformed;
// never reads outside `head`. Meant for fuzzing too: pass (bytes, bytes.size()).
std::map<std::string, StoredTensor> parse_safetensors_header(std::string_view head, uint64_t file_size,
                                                             const std::string& source);

// A shard name from model.safetensors.index.json is used only if it is a plain
// file name inside the folder: not empty, no '/' or '\\', not "." or "..", no NUL.
bool is_plain_shard_name(std::string_view name);

}  // namespace fathom
