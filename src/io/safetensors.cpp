#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

namespace fathom {

// A whole file's bytes: a read-only mapping, or (WeightResidence::ram) a
// private copy in anonymous memory aligned to 2 MiB and advised to use
// transparent huge pages.
class MappedFile {
 public:
  MappedFile(const std::string& path, WeightResidence residence) : path_(path) {
    // O_NONBLOCK: a FIFO planted in a model folder must not hang the open.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    check(fd >= 0, "safetensors: cannot open ", path, ": ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      fail("safetensors: cannot stat ", path);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      fail("safetensors: ", path, " is not a regular file");
    }
    size_ = size_t(st.st_size);
    if (size_ == 0) {
      ::close(fd);
      return;
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    check(p != MAP_FAILED, "safetensors: cannot mmap ", path, ": ", std::strerror(errno));
    data_ = static_cast<const char*>(p);
    mapped_bytes_ = size_;
    if (residence == WeightResidence::ram) copy_to_huge_pages();
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), mapped_bytes_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  static constexpr size_t kHugePage = size_t(2) << 20;

  // Replaces the file mapping with an anonymous copy. The copy goes in chunks,
  // each chunk's file pages dropped from this process once copied, so the
  // resident peak stays near one copy of the file.
  void copy_to_huge_pages() {
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    const size_t bytes = (size_ + page - 1) / page * page;
    // Over-allocate by one huge page, then trim both ends to a 2 MiB-aligned start.
    void* raw = ::mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    check(raw != MAP_FAILED, "safetensors: cannot allocate ", bytes, " bytes to hold ", path_,
          " in memory: ", std::strerror(errno));
    const uintptr_t start = uintptr_t(raw), aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) ::munmap(raw, aligned - start);
    const size_t tail = start + bytes + kHugePage - (aligned + bytes);
    if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    char* copy = reinterpret_cast<char*>(aligned);
    // Only advice: without THP the copy still works, on 4 KiB pages.
    ::madvise(copy, bytes, MADV_HUGEPAGE);
    constexpr size_t kChunk = 16 * kHugePage;
    for (size_t at = 0; at < size_; at += kChunk) {
      const size_t n = std::min(kChunk, size_ - at);
      std::memcpy(copy + at, data_ + at, n);
      ::madvise(const_cast<char*>(data_) + at, (n + page - 1) / page * page, MADV_DONTNEED);
    }
    ::munmap(const_cast<char*>(data_), mapped_bytes_);
    ::mprotect(copy, bytes, PROT_READ);  // weights are immutable, as the mapping was
    data_ = copy;
    mapped_bytes_ = bytes;
  }

  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // length to munmap: size_ rounded up to a page for a copy
};

namespace {
size_t stored_dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype.rfind("F8", 0) == 0) return 1;
  return 0;
}

// Every dimension of a tensor is below this, and so is its element count
// (Tensor counts elements in int64_t).
constexpr uint64_t kMaxElements = uint64_t(std::numeric_limits<int64_t>::max());
constexpr size_t kMaxRank = 8;

// A JSON integer in [0, kMaxElements], or nothing.
std::optional<uint64_t> non_negative_integer(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= kMaxElements ? std::optional(v.get<uint64_t>()) : std::nullopt;
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  return std::nullopt;
}

StoredTensor parse_tensor_entry(const nlohmann::json& entry, uint64_t data_size, const std::string& where) {
  check(entry.is_object(), where, ": entry is not an object: ", json_excerpt(entry));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    check(entry.contains(key), where, ": field ", key, " is missing");
  StoredTensor t;
  const auto& dtype = entry["dtype"];
  check(dtype.is_string(), where, ": field dtype is not a string: ", json_excerpt(dtype));
  t.dtype = dtype.get<std::string>();
  const uint64_t elem = stored_dtype_size(t.dtype);
  check(elem != 0, where, ": field dtype has unknown value \"", t.dtype, "\"");

  const auto& shape = entry["shape"];
  check(shape.is_array() && shape.size() <= kMaxRank, where, ": field shape is not an array of at most ", kMaxRank,
        " dimensions: ", json_excerpt(shape));
  uint64_t elements = 1;
  for (const auto& d : shape) {
    const auto dim = non_negative_integer(d);
    check(dim.has_value(), where, ": field shape has a dimension that is not a non-negative integer: ",
          json_excerpt(d));
    check(!__builtin_mul_overflow(elements, *dim, &elements) && elements <= kMaxElements, where,
          ": field shape ", json_excerpt(shape), " has too many elements");
    t.shape.push_back(int64_t(*dim));
  }
  uint64_t expected_bytes = 0;
  check(!__builtin_mul_overflow(elements, elem, &expected_bytes), where, ": field shape ", json_excerpt(shape),
        " is too large for dtype ", t.dtype);

  const auto& offsets = entry["data_offsets"];
  check(offsets.is_array() && offsets.size() == 2, where, ": field data_offsets is not two integers: ",
        json_excerpt(offsets));
  const auto begin = non_negative_integer(offsets[0]), end = non_negative_integer(offsets[1]);
  check(begin.has_value() && end.has_value(), where, ": field data_offsets is not two non-negative integers: ",
        json_excerpt(offsets));
  check(*begin <= *end && *end <= data_size, where, ": field data_offsets [", *begin, ", ", *end,
        "] is outside the data section of ", data_size, " bytes (truncated or corrupt file)");
  check(*end - *begin == expected_bytes, where, ": field data_offsets spans ", *end - *begin,
        " bytes but its shape and dtype need ", expected_bytes);
  t.offset = size_t(*begin);  // from the data section; the caller adds its start
  t.nbytes = size_t(expected_bytes);
  return t;
}
}  // namespace

std::map<std::string, StoredTensor> parse_safetensors_header(std::string_view head, uint64_t file_size,
                                                             const std::string& source) {
  const std::string what = "safetensors " + source;
  check(file_size >= 8 && head.size() >= 8, what, ": truncated (", file_size, " bytes, no header)");
  check(head.size() <= file_size, what, ": ", head.size(), " bytes given for a file of ", file_size);
  uint64_t header_len = 0;
  std::memcpy(&header_len, head.data(), 8);  // little-endian, as the format and every host fathom runs on
  check(header_len <= file_size - 8, what, ": truncated (header of ", header_len, " bytes, file of ", file_size, ")");
  check(header_len <= kMaxSafetensorsHeaderBytes, what, ": header of ", header_len, " bytes is larger than the ",
        kMaxSafetensorsHeaderBytes, " allowed");
  check(header_len <= head.size() - 8, what, ": truncated (header of ", header_len, " bytes, only ",
        head.size() - 8, " read)");
  // Tensor entries nest 3 deep ({name: {shape: [...]}}); __metadata__ is a flat map.
  const nlohmann::json header = parse_json_bounded(head.substr(8, size_t(header_len)), what + " header", 8);
  check(header.is_object(), what, ": header is not a JSON object");
  const uint64_t data_start = 8 + header_len, data_size = file_size - data_start;
  std::map<std::string, StoredTensor> tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    StoredTensor t = parse_tensor_entry(entry, data_size, what + ": tensor \"" + name + "\"");
    t.offset += size_t(data_start);
    tensors.emplace(name, std::move(t));
  }
  return tensors;
}

bool is_plain_shard_name(std::string_view name) {
  constexpr std::string_view kSeparators("/\\\0", 3);
  return !name.empty() && name != "." && name != ".." && name.find_first_of(kSeparators) == std::string_view::npos;
}

DType parse_safetensors_dtype(const std::string& name) {
  if (name == "F32") return DType::f32;
  if (name == "BF16") return DType::bf16;
  if (name == "F16") return DType::f16;
  if (name == "U32") return DType::u32;  // packed quantized codes
  fail("safetensors: unsupported tensor dtype ", name, " (supported: F32, BF16, F16, U32)");
}

WeightStore WeightStore::open_file(const std::string& path, WeightResidence residence) {
  WeightStore store;
  store.residence_ = residence;
  store.add_file(path);
  return store;
}

namespace {

// The safetensors files of a model folder and, for a sharded one, which file
// the index says holds each tensor.
struct FolderFiles {
  std::vector<std::string> paths;
  std::vector<std::pair<std::string, int>> listed;  // tensor name, index into paths
  std::string index_path;
};

FolderFiles folder_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;  // the non-throwing overloads: a permission error is a fathom::Error too
  check(fs::is_directory(dir, ec), "model folder not found: ", dir);
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  FolderFiles out;
  if (!fs::exists(index, ec)) {
    check(fs::exists(single, ec), "no model.safetensors or model.safetensors.index.json in ", dir);
    out.paths.push_back(single.string());
    return out;
  }
  out.index_path = index.string();
  const std::string what = "safetensors index " + out.index_path;
  const nlohmann::json j = parse_json_bounded(read_file_capped(index), what);
  check(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), what, ": no weight_map object");
  const nlohmann::json& weight_map = j["weight_map"];
  check(!weight_map.empty(), what, ": weight_map is empty");
  std::vector<std::string> shards;
  for (const auto& [name, file] : weight_map.items()) {
    check(file.is_string(), what, ": weight_map entry \"", name, "\" is not a file name: ", json_excerpt(file));
    const std::string shard = file.get<std::string>();
    // Shards are read from the folder itself: a path (absolute, "../x", "sub/x")
    // could open any file the server can read.
    check(is_plain_shard_name(shard), what, ": weight_map entry \"", name, "\" names shard \"", shard,
          "\", which is not a plain file name inside the model folder");
    auto at = std::find(shards.begin(), shards.end(), shard);
    if (at == shards.end()) at = shards.insert(at, shard);
    out.listed.emplace_back(name, int(at - shards.begin()));
  }
  for (const auto& s : shards) out.paths.push_back((fs::path(dir) / s).string());
  return out;
}

// Every tensor the index lists is in the shard it names.
void check_index(const FolderFiles& files, const std::map<std::string, StoredTensor>& tensors) {
  for (const auto& [name, file] : files.listed) {
    auto it = tensors.find(name);
    check(it != tensors.end() && it->second.file == file, "safetensors index ", files.index_path, ": tensor \"",
          name, "\" is listed in ", files.paths[size_t(file)], " but that shard does not hold it");
  }
}

void add_tensors(std::map<std::string, StoredTensor>& all, std::map<std::string, StoredTensor> tensors, int file,
                 const std::vector<std::string>& paths) {
  for (auto& [name, t] : tensors) {
    auto existing = all.find(name);
    check(existing == all.end(), "safetensors ", paths[size_t(file)], ": tensor \"", name, "\" is also in ",
          existing == all.end() ? std::string() : paths[size_t(existing->second.file)]);
    t.file = file;
    all.emplace(name, std::move(t));
  }
}

// One file's header, read without touching (or needing) its tensor data.
std::map<std::string, StoredTensor> read_header_only(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(bool(in), "safetensors: cannot open ", path);
  char prefix[8];
  in.read(prefix, 8);
  check(in.gcount() == 8, "safetensors ", path, ": truncated (no header)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, prefix, 8);
  check(header_len <= kMaxSafetensorsHeaderBytes, "safetensors ", path, ": header of ", header_len,
        " bytes is larger than the ", kMaxSafetensorsHeaderBytes, " allowed");
  std::string head(8 + size_t(header_len), '\0');
  std::memcpy(head.data(), prefix, 8);
  in.read(head.data() + 8, std::streamsize(header_len));
  check(uint64_t(in.gcount()) == header_len, "safetensors ", path, ": truncated (header of ", header_len,
        " bytes, only ", in.gcount(), " present)");
  // The data may be missing: offsets are checked against each other, not the file.
  return parse_safetensors_header(head, std::numeric_limits<uint64_t>::max() / 4, path);
}

}  // namespace

WeightStore WeightStore::open_folder(const std::string& dir, WeightResidence residence) {
  const FolderFiles files = folder_files(dir);
  WeightStore store;
  store.residence_ = residence;
  for (const auto& path : files.paths) store.add_file(path);
  check_index(files, store.tensors_);
  return store;
}

std::map<std::string, StoredTensor> read_safetensors_headers(const std::string& dir) {
  const FolderFiles files = folder_files(dir);
  std::map<std::string, StoredTensor> all;
  for (size_t i = 0; i < files.paths.size(); ++i) add_tensors(all, read_header_only(files.paths[i]), int(i), files.paths);
  check_index(files, all);
  return all;
}

void WeightStore::add_file(const std::string& path) {
  auto file = std::make_shared<MappedFile>(path, residence_);
  std::vector<std::string> paths;
  for (const auto& f : files_) paths.push_back(f->path());
  paths.push_back(path);
  add_tensors(tensors_, parse_safetensors_header(std::string_view(file->data(), file->size()), file->size(), path),
              int(files_.size()), paths);
  files_.push_back(std::move(file));
}

const StoredTensor& WeightStore::info(const std::string& name) const {
  auto it = tensors_.find(name);
  check(it != tensors_.end(), "weights: tensor ", name, " not found");
  return it->second;
}

Tensor WeightStore::get(const std::string& name) const {
  const StoredTensor& t = info(name);
  const DType dtype = parse_safetensors_dtype(t.dtype);
  const auto& file = files_[t.file];
  return Tensor::borrow(const_cast<char*>(file->data() + t.offset), t.shape, dtype, file);
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  for (auto& [name, _] : tensors_) out.push_back(name);
  return out;
}

int64_t WeightStore::total_bytes() const {
  int64_t total = 0;
  for (auto& [_, t] : tensors_) total += int64_t(t.nbytes);
  return total;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto& [name, t] : tensors) entries.push_back({name, t.dtype(), t.shape()});
  SafetensorsWriter writer(path, std::move(entries));
  for (const auto& [_, t] : tensors) writer.write(t);
  writer.finish();
}

size_t SafetensorsWriter::Entry::nbytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<Entry> entries)
    : path_(path), entries_(std::move(entries)) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  size_t offset = 0;
  for (const Entry& e : entries_) {
    check(e.dtype == DType::f32 || e.dtype == DType::bf16 || e.dtype == DType::f16 || e.dtype == DType::u32,
          "write_safetensors: ", e.name, " has unsupported dtype ", dtype_name(e.dtype));
    const char* dt = e.dtype == DType::f32    ? "F32"
                     : e.dtype == DType::bf16 ? "BF16"
                     : e.dtype == DType::f16  ? "F16"
                                              : "U32";
    header[e.name] = {{"dtype", dt}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.nbytes()}}};
    offset += e.nbytes();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8) text += ' ';
  out_ = std::make_unique<std::ofstream>(path, std::ios::binary);
  check(bool(*out_), "write_safetensors: cannot create ", path);
  const uint64_t len = text.size();
  out_->write(reinterpret_cast<const char*>(&len), 8);
  out_->write(text.data(), std::streamsize(text.size()));
}

void SafetensorsWriter::write(const Tensor& t) {
  check(next_ < entries_.size(), "write_safetensors: ", path_, " has ", entries_.size(), " tensors; one more was written");
  const Entry& e = entries_[next_];
  check(t.dtype() == e.dtype && t.shape() == e.shape, "write_safetensors: ", e.name, " was declared ",
        dtype_name(e.dtype), " ", nlohmann::json(e.shape).dump(), ", written as ", dtype_name(t.dtype()), " ",
        t.shape_string());
  out_->write(static_cast<const char*>(t.raw()), std::streamsize(t.nbytes()));
  check(bool(*out_), "write_safetensors: write failed for ", path_);
  ++next_;
}

void SafetensorsWriter::finish() {
  check(next_ == entries_.size(), "write_safetensors: ", path_, ": ", next_, " of ", entries_.size(),
        " tensors written");
  out_->close();
  check(!out_->fail(), "write_safetensors: write failed for ", path_);
}

SafetensorsWriter::~SafetensorsWriter() = default;

}  // namespace fathom
