#include "backend/opencl/cl_api.h"

#include <vector>

#include "dgemma/error.h"

namespace dgemma::opencl {

std::string cl_error_name(cl_int code) {
  switch (code) {
#define DGEMMA_CL_CODE(c) \
  case c: return #c;
    DGEMMA_CL_CODE(CL_SUCCESS)
    DGEMMA_CL_CODE(CL_DEVICE_NOT_FOUND)
    DGEMMA_CL_CODE(CL_DEVICE_NOT_AVAILABLE)
    DGEMMA_CL_CODE(CL_COMPILER_NOT_AVAILABLE)
    DGEMMA_CL_CODE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    DGEMMA_CL_CODE(CL_OUT_OF_RESOURCES)
    DGEMMA_CL_CODE(CL_OUT_OF_HOST_MEMORY)
    DGEMMA_CL_CODE(CL_PROFILING_INFO_NOT_AVAILABLE)
    DGEMMA_CL_CODE(CL_MEM_COPY_OVERLAP)
    DGEMMA_CL_CODE(CL_IMAGE_FORMAT_MISMATCH)
    DGEMMA_CL_CODE(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    DGEMMA_CL_CODE(CL_BUILD_PROGRAM_FAILURE)
    DGEMMA_CL_CODE(CL_MAP_FAILURE)
    DGEMMA_CL_CODE(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    DGEMMA_CL_CODE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    DGEMMA_CL_CODE(CL_COMPILE_PROGRAM_FAILURE)
    DGEMMA_CL_CODE(CL_LINKER_NOT_AVAILABLE)
    DGEMMA_CL_CODE(CL_LINK_PROGRAM_FAILURE)
    DGEMMA_CL_CODE(CL_DEVICE_PARTITION_FAILED)
    DGEMMA_CL_CODE(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    DGEMMA_CL_CODE(CL_INVALID_VALUE)
    DGEMMA_CL_CODE(CL_INVALID_DEVICE_TYPE)
    DGEMMA_CL_CODE(CL_INVALID_PLATFORM)
    DGEMMA_CL_CODE(CL_INVALID_DEVICE)
    DGEMMA_CL_CODE(CL_INVALID_CONTEXT)
    DGEMMA_CL_CODE(CL_INVALID_QUEUE_PROPERTIES)
    DGEMMA_CL_CODE(CL_INVALID_COMMAND_QUEUE)
    DGEMMA_CL_CODE(CL_INVALID_HOST_PTR)
    DGEMMA_CL_CODE(CL_INVALID_MEM_OBJECT)
    DGEMMA_CL_CODE(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    DGEMMA_CL_CODE(CL_INVALID_IMAGE_SIZE)
    DGEMMA_CL_CODE(CL_INVALID_SAMPLER)
    DGEMMA_CL_CODE(CL_INVALID_BINARY)
    DGEMMA_CL_CODE(CL_INVALID_BUILD_OPTIONS)
    DGEMMA_CL_CODE(CL_INVALID_PROGRAM)
    DGEMMA_CL_CODE(CL_INVALID_PROGRAM_EXECUTABLE)
    DGEMMA_CL_CODE(CL_INVALID_KERNEL_NAME)
    DGEMMA_CL_CODE(CL_INVALID_KERNEL_DEFINITION)
    DGEMMA_CL_CODE(CL_INVALID_KERNEL)
    DGEMMA_CL_CODE(CL_INVALID_ARG_INDEX)
    DGEMMA_CL_CODE(CL_INVALID_ARG_VALUE)
    DGEMMA_CL_CODE(CL_INVALID_ARG_SIZE)
    DGEMMA_CL_CODE(CL_INVALID_KERNEL_ARGS)
    DGEMMA_CL_CODE(CL_INVALID_WORK_DIMENSION)
    DGEMMA_CL_CODE(CL_INVALID_WORK_GROUP_SIZE)
    DGEMMA_CL_CODE(CL_INVALID_WORK_ITEM_SIZE)
    DGEMMA_CL_CODE(CL_INVALID_GLOBAL_OFFSET)
    DGEMMA_CL_CODE(CL_INVALID_EVENT_WAIT_LIST)
    DGEMMA_CL_CODE(CL_INVALID_EVENT)
    DGEMMA_CL_CODE(CL_INVALID_OPERATION)
    DGEMMA_CL_CODE(CL_INVALID_GL_OBJECT)
    DGEMMA_CL_CODE(CL_INVALID_BUFFER_SIZE)
    DGEMMA_CL_CODE(CL_INVALID_MIP_LEVEL)
    DGEMMA_CL_CODE(CL_INVALID_GLOBAL_WORK_SIZE)
    DGEMMA_CL_CODE(CL_INVALID_PROPERTY)
    DGEMMA_CL_CODE(CL_INVALID_IMAGE_DESCRIPTOR)
    DGEMMA_CL_CODE(CL_INVALID_COMPILER_OPTIONS)
    DGEMMA_CL_CODE(CL_INVALID_LINKER_OPTIONS)
    DGEMMA_CL_CODE(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef DGEMMA_CL_CODE
    case kPlatformNotFound: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL error " + std::to_string(code);
  }
}

void cl_fail(cl_int code, const char* call, const std::string& where) {
  throw Error("opencl backend: " + std::string(call) + " failed with " + cl_error_name(code) + " (" +
              std::to_string(code) + ") in " + where);
}

std::string device_string(cl_device_id device, cl_device_info what) {
  size_t n = 0;
  cl_check(clGetDeviceInfo(device, what, 0, nullptr, &n), "clGetDeviceInfo", "reading a device's properties");
  std::vector<char> s(n + 1, '\0');
  cl_check(clGetDeviceInfo(device, what, n, s.data(), nullptr), "clGetDeviceInfo", "reading a device's properties");
  return std::string(s.data());
}

std::string platform_string(cl_platform_id platform, cl_platform_info what) {
  size_t n = 0;
  cl_check(clGetPlatformInfo(platform, what, 0, nullptr, &n), "clGetPlatformInfo", "reading a platform's properties");
  std::vector<char> s(n + 1, '\0');
  cl_check(clGetPlatformInfo(platform, what, n, s.data(), nullptr), "clGetPlatformInfo",
           "reading a platform's properties");
  return std::string(s.data());
}

}  // namespace dgemma::opencl
