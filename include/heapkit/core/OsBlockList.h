// An intrusive list of the blocks a top heap obtained from the OS or libc, so that its
// destructor can return every one of them even when the layers above leaked objects.
#pragma once

#include <cstddef>

namespace heapkit {

class OsBlockList {
 public:
  // 32 bytes keeps the object after it 16-byte aligned and leaves room for the size word.
  struct alignas(16) Header {
    Header* prev;
    Header* next;
    std::size_t blockBytes;  // what was obtained, header included
    std::size_t usableBytes; // the size word of the object that follows
  };
  static_assert(sizeof(Header) == 32);

  static Header* headerOf(void* object) { return static_cast<Header*>(object) - 1; }
  static void* objectOf(Header* header) { return header + 1; }

  void push(Header* header) {
    header->prev = nullptr;
    header->next = head_;
    if (head_) head_->prev = header;
    head_ = header;
  }

  void remove(Header* header) {
    if (header->prev) header->prev->next = header->next;
    else head_ = header->next;
    if (header->next) header->next->prev = header->prev;
  }

  Header* popFront() {
    Header* header = head_;
    if (header) remove(header);
    return header;
  }

  bool empty() const { return head_ == nullptr; }

 private:
  Header* head_ = nullptr;
};

}  // namespace heapkit
