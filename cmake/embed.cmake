# embed.cmake -- turn device helper files (.cuh) into C string constants, so
# they can be read and reviewed as CUDA yet travel inside the library.
# Usage: cmake -DOUT=file.c -DINPUTS="a.cuh|b.cuh" -P embed.cmake
string(REPLACE "|" ";" INPUTS "${INPUTS}")
set(text "/* generated from the .cuh files by cmake/embed.cmake: do not edit */\n")
foreach(in IN LISTS INPUTS)
  get_filename_component(name "${in}" NAME)
  string(REPLACE "." "_" sym "${name}")
  file(READ "${in}" body HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${body}")
  string(APPEND text "const char ${sym}[] = {${body}0x00};\n")
endforeach()
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
