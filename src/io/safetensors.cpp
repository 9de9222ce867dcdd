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
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fathom {

// A whole file's bytes: a read-only mapping, or (WeightResidence::ram) a
// private copy in anonymous memory aligned to 2 MiB and advised to use
// transparent huge pages.
class MappedFile {
 public:
  MappedFile(const std::string& path, WeightResidence residence) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    check(fd >= 0, "safetensors: cannot open ", path, ": ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      fail("safetensors: cannot stat ", path);
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
}  // namespace

DType parse_safetensors_dtype(const std::string& name) {
  if (name == "F32") return DType::f32;
  if (name == "BF16") return DType::bf16;
  if (name == "F16") return DType::f16;
  fail("safetensors: unsupported tensor dtype ", name, " (supported: F32, BF16, F16)");
}

WeightStore WeightStore::open_file(const std::string& path, WeightResidence residence) {
  WeightStore store;
  store.residence_ = residence;
  store.add_file(path);
  return store;
}

WeightStore WeightStore::open_folder(const std::string& dir, WeightResidence residence) {
  namespace fs = std::filesystem;
  check(fs::is_directory(dir), "model folder not found: ", dir);
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  WeightStore store;
  store.residence_ = residence;
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      in >> j;
    } catch (const std::exception& e) {
      fail("safetensors index ", index.string(), ": invalid JSON: ", e.what());
    }
    check(j.contains("weight_map") && j["weight_map"].is_object(), "safetensors index ",
          index.string(), ": no weight_map object");
    std::vector<std::string> shards;
    for (auto& [name, file] : j["weight_map"].items()) {
      check(file.is_string(), "safetensors index: weight_map entry ", name, " is not a file name");
      if (std::find(shards.begin(), shards.end(), file.get<std::string>()) == shards.end())
        shards.push_back(file.get<std::string>());
    }
    for (auto& s : shards) store.add_file((fs::path(dir) / s).string());
    for (auto& [name, file] : j["weight_map"].items())
      check(store.has(name), "safetensors index: ", name, " is listed in ", file.get<std::string>(),
            " but that shard does not hold it");
  } else {
    check(fs::exists(single), "no model.safetensors or model.safetensors.index.json in ", dir);
    store.add_file(single.string());
  }
  return store;
}

void WeightStore::add_file(const std::string& path) {
  auto file = std::make_shared<MappedFile>(path, residence_);
  const size_t size = file->size();
  check(size >= 8, "safetensors ", path, ": truncated (", size, " bytes, no header)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file->data(), 8);
  check(header_len <= size - 8, "safetensors ", path, ": truncated (header of ", header_len,
        " bytes, file of ", size, ")");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file->data() + 8, file->data() + 8 + header_len);
  } catch (const std::exception& e) {
    fail("safetensors ", path, ": invalid header JSON: ", e.what());
  }
  check(header.is_object(), "safetensors ", path, ": header is not an object");
  const size_t data_start = 8 + header_len;
  const int file_index = int(files_.size());
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    StoredTensor t;
    try {
      t.dtype = entry.at("dtype").get<std::string>();
      t.shape = entry.at("shape").get<std::vector<int64_t>>();
      auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      check(offsets.size() == 2 && offsets[0] <= offsets[1], "bad data_offsets");
      t.offset = data_start + offsets[0];
      t.nbytes = offsets[1] - offsets[0];
    } catch (const Error&) {
      fail("safetensors ", path, ": tensor ", name, " has bad data_offsets");
    } catch (const std::exception& e) {
      fail("safetensors ", path, ": tensor ", name, " has a malformed entry: ", e.what());
    }
    int64_t n = 1;
    for (int64_t d : t.shape) {
      check(d >= 0, "safetensors ", path, ": tensor ", name, " has a negative dimension");
      n *= d;
    }
    const size_t elem = stored_dtype_size(t.dtype);
    check(elem != 0, "safetensors ", path, ": tensor ", name, " has unknown dtype ", t.dtype);
    check(size_t(n) * elem == t.nbytes, "safetensors ", path, ": tensor ", name, " has ", t.nbytes,
          " bytes but its shape and dtype need ", size_t(n) * elem);
    check(t.offset + t.nbytes <= size, "safetensors ", path, ": truncated (tensor ", name,
          " ends at byte ", t.offset + t.nbytes, ", file has ", size, ")");
    t.file = file_index;
    tensors_[name] = std::move(t);
  }
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
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (auto& [name, t] : tensors) {
    const char* dt = t.dtype() == DType::f32 ? "F32" : t.dtype() == DType::bf16 ? "BF16" : "F16";
    check(t.dtype() != DType::i32, "write_safetensors: ", name, " has unsupported dtype i32");
    header[name] = {{"dtype", dt}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8) text += ' ';
  std::ofstream out(path, std::ios::binary);
  check(bool(out), "write_safetensors: cannot create ", path);
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (auto& [_, t] : tensors) out.write(static_cast<const char*>(t.raw()), std::streamsize(t.nbytes()));
  check(bool(out), "write_safetensors: write failed for ", path);
}

}  // namespace fathom
