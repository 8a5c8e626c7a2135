# embed.cmake -- turn device helper files (.cuh) into C string constants, so
# they can be read and reviewed as CUDA yet travel inside the library.
# Usage: cmake -DOUT=file.c -DINPUTS="a.cuh|b.h+c.cuh" -P embed.cmake
# Each entry is one string named after its last file (c_cuh); "b.h+c.cuh" joins b.h ahead of c.cuh.
string(REPLACE "|" ";" INPUTS "${INPUTS}")
set(text "/* generated from the .cuh files by cmake/embed.cmake: do not edit */\n")
foreach(entry IN LISTS INPUTS)
  string(REPLACE "+" ";" parts "${entry}")
  set(body "")
  foreach(in IN LISTS parts)
    get_filename_component(name "${in}" NAME)
    file(READ "${in}" hex HEX)
    string(APPEND body "${hex}")
  endforeach()
  string(REPLACE "." "_" sym "${name}")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${body}")
  string(APPEND text "const char ${sym}[] = {${body}0x00};\n")
endforeach()
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
